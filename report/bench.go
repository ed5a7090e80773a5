package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/schema"
	"golang.org/x/perf/benchfmt"
)

// RunBenchText writes a run's bench.txt: s in the Go benchmark format that benchstat reads: the
// configuration as "key: value" lines, Unit lines that mark counts exact,
// then one result line whose iteration count is the window's requests.
// Its figures are the metric table's rows marked Bench, in its order.
func RunBenchText(w io.Writer, s *schema.Summary, name string, config map[string]string) error {
	keep := inBench
	if s.PerRequest.Instructions != nil {
		// An instructions window is paced and slowed by callgrind: its
		// rate and latencies say nothing of the target.
		keep = func(m metric.Metric) bool { return m.Bench && m.Judged == metric.Instructions }
	}
	ms := figures(metric.Doc(s), "req", keep)
	bw := benchfmt.NewWriter(w)
	for _, m := range ms {
		if err := writeExact(bw, m.name); err != nil {
			return err
		}
	}
	res := &benchfmt.Result{Name: benchfmt.Name(benchName(name)), Iters: int(s.Window.Requests)}
	for _, k := range slices.Sorted(maps.Keys(config)) {
		res.Config = append(res.Config, benchfmt.Config{Key: k, Value: []byte(config[k]), File: true})
	}
	for _, m := range ms {
		// Four decimals at most, as the figures are rounded elsewhere.
		res.Values = append(res.Values, benchfmt.Value{Value: round(m.v, 4), Unit: m.name})
	}
	return bw.Write(res)
}

// writeExact writes unit's "Unit ... assume=exact" line when the metric
// table judges it an exact count, so that benchstat calls any change
// significant.
func writeExact(bw *benchfmt.Writer, unit string) error {
	if !exactUnit(unit) {
		return nil
	}
	return bw.Write(&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: unit, Key: "assume"}, OrigUnit: unit, Value: "exact"})
}

// exactUnit reports whether the metric table judges unit as an exact
// count: bench.txt marks it assume=exact, so that benchstat calls any
// change significant.
func exactUnit(unit string) bool {
	m, ok := metric.Lookup(unit)
	return ok && m.Judged.Counted()
}

// benchName makes a benchmark name from a target name: no spaces, first
// letter upper case.
func benchName(target string) string {
	var b strings.Builder
	for _, r := range target {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if n == "" {
		return "Probe"
	}
	return "Probe/" + n
}

// BenchText writes probe run -bench's bench.txt: one line per result, the ns/op of the
// plain binary and the counted figures per op (the metric table's rows
// marked Bench), exact ones marked so.
func BenchText(w io.Writer, s *schema.BenchSummary) error {
	bw := benchfmt.NewWriter(w)
	for _, m := range metric.Table {
		if name, ok := m.Written("op"); ok && m.Bench {
			if err := writeExact(bw, name); err != nil {
				return err
			}
		}
	}
	config := map[string]string{"target": s.Target, "commit": s.Commit, "go": s.Go}
	for _, b := range s.Benchmarks {
		res := &benchfmt.Result{Name: benchfmt.Name(strings.TrimPrefix(b.Name, "Benchmark")), Iters: b.N}
		for _, k := range slices.Sorted(maps.Keys(config)) {
			res.Config = append(res.Config, benchfmt.Config{Key: k, Value: []byte(config[k]), File: true})
		}
		for _, f := range figures(metric.Doc(b), "op", inBench) {
			res.Values = append(res.Values, benchfmt.Value{Value: round(f.v, 4), Unit: f.name})
		}
		if err := bw.Write(res); err != nil {
			return err
		}
	}
	return nil
}

// TopTable is one profile's largest sites per op, for report.md.
type TopTable struct {
	What  string // the profile's figure ("allocations", "bytes copied")
	Unit  string // of its values, "" for a count
	Rows  []Site
	Value int   // the index in each site's Values that the table shows
	Total int64 // every site's, the table's last row
	// N is the ops the values hold when they are not the result's N (a
	// run of its own: the traced run's, the instructions' difference).
	N         int
	Remainder int64 // the sites not shown
}

// Bench is what probe run -bench's report.md and terminal lines are made
// of: the summary, each result's top tables by folder (BenchFolder), and
// the results folder.
type Bench struct {
	Summary *schema.BenchSummary
	Dir     string
	Top     map[string][]TopTable
}

// BenchFolder is the folder of a result's profiles: its name made a file
// name, and the k-th result of that name (from 0) numbered from 2.
func BenchFolder(name string, k int) string {
	f := strings.NewReplacer("/", "_", " ", "_", ":", "_").Replace(name)
	if k > 0 {
		f += "." + strconv.Itoa(k+1)
	}
	return f
}

// Markdown writes report.md: the table of results, then each result's
// largest sites per op, with what the rows leave out.
func (o *Bench) Markdown(w io.Writer) {
	s := o.Summary
	fmt.Fprintf(w, "# probe run -bench: %s %s\n\n", safetext.Markdown(s.Target), safetext.Code(s.Commit))
	fmt.Fprintf(w, "`-bench %s`", s.Bench)
	if s.Benchtime != "" {
		fmt.Fprintf(w, " `-benchtime %s`", s.Benchtime)
	}
	fmt.Fprintf(w, " `-count %d`, %s", s.Count, s.Go)
	if s.Build != nil {
		fmt.Fprintf(w, "; build: %s", BuildLine(s.Build))
	}
	fmt.Fprint(w, ".\n\nns/op is the plain test binary's. Every other figure is counted in the timed region of the run testing reported (from the start or the last ResetTimer, without StopTimer's pauses), divided by its N; -benchmem is testing's own count of that run. Allocations and retained bytes are per op once warm (two warm runs of 1 and M+1 ops after it, M being N/4 when 4 divides N, N/2 for another even N, N for an odd N: the second's counts minus the first's, times N/M); what the reported run paid beyond that is listed apart, as paid once.\n\n")
	for _, c := range s.Cut {
		fmt.Fprintf(w, "- **Cut:** %s\n", c)
	}
	for _, b := range s.Blind {
		fmt.Fprintf(w, "- %s\n", b)
	}
	writeBenchTable(w, s)
	seen := map[string]int{}
	for _, b := range s.Benchmarks {
		k := seen[b.Name]
		seen[b.Name]++
		folder := BenchFolder(b.Name, k)
		fmt.Fprintf(w, "\n## %s\n", folder)
		if b.CountsDiffer != "" {
			fmt.Fprintf(w, "\n**Not go test's count:** %s.\n", b.CountsDiffer)
		}
		if b.SteadyNote != "" {
			fmt.Fprintf(w, "\n%s.\n", b.SteadyNote)
		}
		writeOnce(w, b)
		for _, t := range o.Top[folder] {
			n := b.N
			if t.N > 0 {
				n = t.N
			}
			fmt.Fprintf(w, "\n%s per op (of %d ops):\n\n| per op | site |\n|---:|---|\n", t.What, n)
			for _, r := range t.Rows {
				fmt.Fprintf(w, "| %s | %s |\n", perOp(r.Values[t.Value], n, t.Unit), r.Func)
			}
			fmt.Fprintf(w, "| %s | (remainder: the other sites) |\n| %s | total |\n", perOp(t.Remainder, n, t.Unit), perOp(t.Total, n, t.Unit))
		}
	}
}

// writeBenchTable is report.md's table of results: a column per figure
// bench.txt carries (the metric table's rows marked Bench, per op), then
// go test -benchmem's own two.
func writeBenchTable(w io.Writer, s *schema.BenchSummary) {
	var cols []metric.Metric
	fmt.Fprint(w, "\n| benchmark | N |")
	for _, m := range metric.Table {
		if name, ok := m.Written("op"); ok && m.Bench && m.BenchSummary != "" {
			if m.Callgrind && !slices.ContainsFunc(s.Benchmarks, func(b schema.BenchFigures) bool {
				_, ok := metric.At(metric.Doc(b), m.BenchSummary)
				return ok
			}) {
				continue // counted only with -instructions: no column of n/a
			}
			cols = append(cols, m)
			fmt.Fprintf(w, " %s |", name)
		}
	}
	fmt.Fprintf(w, " -benchmem allocs/op | -benchmem B/op |\n|---|---:|%s---:|---:|\n", strings.Repeat("---:|", len(cols)))
	for _, b := range s.Benchmarks {
		doc := metric.Doc(b)
		fmt.Fprintf(w, "| %s | %d |", b.Name, b.N)
		for _, m := range cols {
			v, ok := metric.At(doc, m.BenchSummary)
			if !ok {
				fmt.Fprint(w, " n/a |")
				continue
			}
			name, _ := m.Written("op")
			fmt.Fprintf(w, " %s |", figure{m, name, v, "op"}.text())
		}
		fmt.Fprintf(w, " %s | %s |\n", fmtFloat(b.Benchmem.Allocs, 4), fmtFloat(b.Benchmem.Bytes, 2))
	}
}

func perOp(v int64, n int, unit string) string {
	s := strconv.FormatFloat(round(float64(v)/float64(n), 4), 'f', -1, 64)
	if unit != "" && unit != "allocs" {
		s += " " + unit
	}
	return s
}

// TerminalQuiet is -q's: one line per benchmark, and the results folder.
func (r *Bench) TerminalQuiet(w io.Writer) {
	for _, b := range r.Summary.Benchmarks {
		fmt.Fprint(w, b.Name)
		for _, f := range figures(metric.Doc(b), "op", inBench) {
			fmt.Fprintf(w, "  %s %s", f.text(), f.name)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "results %s\n", r.Dir)
}

// Terminal prints a benchmark run's results, one block per result.
func (r *Bench) Terminal(w io.Writer) {
	s := r.Summary
	fmt.Fprintf(w, "%s  %s  benchmarks (-bench %s)\n", s.Target, s.Commit, s.Bench)
	if s.Build != nil {
		fmt.Fprintf(w, "  build         %s\n", BuildLine(s.Build))
	}
	for _, c := range s.Cut {
		fmt.Fprintf(w, "  cut           %s\n", c)
	}
	for _, b := range s.Benchmarks {
		fmt.Fprintf(w, "  %s  N=%d  %s ns/op [plain binary]\n", b.Name, b.N, fmtPtr(b.PerOp.NS, 2))
		writeBenchFigures(w, s, b)
		switch {
		case b.PerOp.OffCPUNS == nil: // not traced
		case len(b.PerOp.OffCPUNS) == 0:
			fmt.Fprintf(w, "    off-CPU     no wait ended in the timed region  [%s]\n", s.Sources["offcpu"])
		default:
			var total float64
			for _, v := range b.PerOp.OffCPUNS {
				total += v
			}
			fmt.Fprintf(w, "    off-CPU     %s ns/op%s  [%s]\n", strconv.FormatFloat(round(total, 2), 'f', -1, 64), byName(b.PerOp.OffCPUNS), s.Sources["offcpu"])
		}
		writeBenchRetained(w, b)
	}
	for _, b := range s.Blind {
		fmt.Fprintf(w, "  note          %s\n", b)
	}
	fmt.Fprintf(w, "  results       %s\n", r.Dir)
}

// writeBenchFigures are a result's lines of the metric table's labelled
// figures per op, one per source; the allocations' line says where they
// come from and go test -benchmem's own count, the syscalls' their names,
// and go test's count when it differs follows them.
func writeBenchFigures(w io.Writer, s *schema.BenchSummary, b schema.BenchFigures) {
	for _, g := range groups(figures(metric.Doc(b), "op", labelled)) {
		words, after := "", ""
		switch g.key {
		case "allocs":
			words = steadyWords(b)
			after = fmt.Sprintf("; -benchmem %s allocs/op, %s B/op", fmtFloat(b.Benchmem.Allocs, 4), fmtFloat(b.Benchmem.Bytes, 2))
		case "syscalls":
			words = byName(b.PerOp.SyscallsByName)
		}
		fmt.Fprintf(w, "    %-11s %s%s  [%s]%s\n", strings.ReplaceAll(g.key, "_", " "), g.line(), words, s.Sources[g.key], after)
		if g.key != "allocs" {
			continue
		}
		if line := OnceLine(b); line != "" {
			fmt.Fprintf(w, "    paid once   %s\n", line)
		}
		if line := FirstLine(b); line != "" {
			fmt.Fprintf(w, "    first op    %s\n", line)
		}
		if b.CountsDiffer != "" {
			fmt.Fprintf(w, "    go test     %s\n", b.CountsDiffer)
		}
	}
}

// writeBenchRetained writes what a benchmark's ops left, under its
// figures: the top sites and goroutines when it is not nothing.
func writeBenchRetained(w io.Writer, b schema.BenchFigures) {
	if b.PerOp.RetainedBytes == nil {
		return
	}
	for i, site := range b.RetainedSites {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "                %.4f objects, %.2f B /op kept by %s\n", site.Objects, site.Bytes, site.Func)
	}
	for i, g := range b.GoroutinesLeft {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "                %.4f goroutines /op in %s, created by %s\n", g.PerReq, g.Func, g.CreatedBy)
	}
}

// byName lists the syscalls per op, largest first, the first four.
func byName(m map[string]float64) string {
	names := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for i, n := range names {
		if i == 4 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s", n, strconv.FormatFloat(m[n], 'f', -1, 64)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// steadyWords says where a result's allocations per op come from.
func steadyWords(b schema.BenchFigures) string {
	if b.Steady == nil {
		return ""
	}
	return fmt.Sprintf(" once warm (warm runs of %d and %d ops)", b.Steady.Runs[0], b.Steady.Runs[1])
}

// OnceLine is what a result's reported run paid once, with its largest
// site, or "" when it paid nothing once.
func OnceLine(b schema.BenchFigures) string {
	st := b.Steady
	if st == nil || (st.OnceAllocs == 0 && st.OnceBytes == 0) {
		return ""
	}
	line := fmt.Sprintf("%d allocs, %d B in the reported run, not per op", st.OnceAllocs, st.OnceBytes)
	if len(st.OnceSites) > 0 && st.OnceSites[0].Func != "(other sites)" {
		line += fmt.Sprintf(" (%d B at %s)", st.OnceSites[0].Bytes, st.OnceSites[0].Func)
	}
	return line + fmt.Sprintf("; go test -benchmem spreads it over b.N=%d: %s allocs/op, %s B/op", b.N, fmtFloat(b.Benchmem.Allocs, 4), fmtFloat(b.Benchmem.Bytes, 2))
}

// FirstLine is what a result's first run (1 op, before the reported run)
// paid beyond a steady op, with its largest site, and what the process
// allocated before it; "" when neither is known.
func FirstLine(b schema.BenchFigures) string {
	var parts []string
	if st := b.Steady; st != nil && st.First != nil && (st.First.Allocs != 0 || st.First.Bytes != 0) {
		line := fmt.Sprintf("%d allocs, %d B beyond a steady op in the first run (testing's 1-op run1, not counted)", st.First.Allocs, st.First.Bytes)
		if len(st.First.Sites) > 0 && st.First.Sites[0].Func != "(other sites)" {
			line += fmt.Sprintf(" (%d B at %s)", st.First.Sites[0].Bytes, st.First.Sites[0].Func)
		}
		parts = append(parts, line)
	}
	if b.Startup != nil {
		parts = append(parts, fmt.Sprintf("the process allocated %d objects, %d B before its first run (package init, TestMain)", b.Startup.Allocs, b.Startup.Bytes))
	}
	return strings.Join(parts, "; ")
}

// writeOnce writes report.md's table of what a result paid once, when it
// paid anything once.
func writeOnce(w io.Writer, b schema.BenchFigures) {
	if line := FirstLine(b); line != "" {
		fmt.Fprintf(w, "\nBefore the reported run: %s.\n", line)
	}
	if OnceLine(b) == "" {
		return
	}
	fmt.Fprintf(w, "\nPaid once in the reported run (not per op; -benchmem spreads it over b.N=%d):\n\n| allocs | bytes | site |\n|---:|---:|---|\n", b.N)
	for _, s := range b.Steady.OnceSites {
		fmt.Fprintf(w, "| %d | %d | %s |\n", s.Allocs, s.Bytes, s.Func)
	}
	fmt.Fprintf(w, "| %d | %d | total |\n", b.Steady.OnceAllocs, b.Steady.OnceBytes)
	if st := b.Steady; st.OnceRetainedBytes != nil && *st.OnceRetainedBytes != 0 {
		fmt.Fprintf(w, "\nLeft live once (the retained run, not per op): %d objects, %d B.\n", *st.OnceRetainedObjects, *st.OnceRetainedBytes)
	}
}
