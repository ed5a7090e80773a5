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

// benchMetric is one figure of bench.txt; Exact marks the figures the
// metric table judges as exact counts.
type benchMetric struct {
	Value float64
	Unit  string
	Exact bool
}

// RunBenchText writes a run's bench.txt: s in the Go benchmark format that benchstat reads: the
// configuration as "key: value" lines, Unit lines that mark counts exact,
// then one result line whose iteration count is the window's requests.
func RunBenchText(w io.Writer, s *schema.Summary, name string, config map[string]string) error {
	ms := benchMetrics(s)
	bw := benchfmt.NewWriter(w)
	for _, m := range ms {
		if m.Exact {
			u := &benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: m.Unit, Key: "assume"}, OrigUnit: m.Unit, Value: "exact"}
			if err := bw.Write(u); err != nil {
				return err
			}
		}
	}
	res := &benchfmt.Result{Name: benchfmt.Name(benchName(name)), Iters: int(s.Window.Requests)}
	for _, k := range slices.Sorted(maps.Keys(config)) {
		res.Config = append(res.Config, benchfmt.Config{Key: k, Value: []byte(config[k]), File: true})
	}
	for _, m := range ms {
		// Four decimals at most, as the figures are rounded elsewhere.
		res.Values = append(res.Values, benchfmt.Value{Value: round(m.Value, 4), Unit: m.Unit})
	}
	return bw.Write(res)
}

// benchMetrics are the figures of bench.txt, in their order.
func benchMetrics(s *schema.Summary) []benchMetric {
	var ms []benchMetric
	add := func(v *float64, unit string) {
		if v != nil {
			ms = append(ms, benchMetric{*v, unit, exactUnit(unit)})
		}
	}
	if s.PerRequest.Instructions != nil {
		// An instructions window is paced and slowed by callgrind: its
		// rate and latencies say nothing of the target.
		add(s.PerRequest.Instructions, "instructions/req")
		return ms
	}
	add(&s.Window.RPS, "req/s")
	add(s.PerRequest.CPUUS, "cpu-us/req")
	add(s.PerRequest.Allocs, "allocs/req")
	add(s.PerRequest.AllocBytes, "B/req")
	add(s.PerRequest.CopiedBytes, "copied-B/req")
	add(s.PerRequest.ClearedBytes, "cleared-B/req")
	add(s.PerRequest.Syscalls, "syscalls/req")
	add(s.PerRequest.RetainedBytes, "retained-B/req")
	add(s.PerRequest.GoroutinesLeft, "goroutines-left/req")
	add(s.DatagramsPerRequest, "datagrams/req")
	for _, q := range []string{"p50", "p99", "p999"} {
		if v, ok := s.Window.LatencyUS[q]; ok {
			f := float64(v)
			add(&f, q+"-us")
		}
	}
	return ms
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
// plain binary and the counted figures per op, exact ones marked so.
func BenchText(w io.Writer, s *schema.BenchSummary) error {
	bw := benchfmt.NewWriter(w)
	for _, u := range benchUnits {
		if !exactUnit(u) {
			continue
		}
		if err := bw.Write(&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: u, Key: "assume"}, OrigUnit: u, Value: "exact"}); err != nil {
			return err
		}
	}
	config := map[string]string{"target": s.Target, "commit": s.Commit, "go": s.Go}
	for _, b := range s.Benchmarks {
		res := &benchfmt.Result{Name: benchfmt.Name(strings.TrimPrefix(b.Name, "Benchmark")), Iters: b.N}
		for _, k := range slices.Sorted(maps.Keys(config)) {
			res.Config = append(res.Config, benchfmt.Config{Key: k, Value: []byte(config[k]), File: true})
		}
		add := func(v *float64, unit string) {
			if v != nil {
				res.Values = append(res.Values, benchfmt.Value{Value: round(*v, 4), Unit: unit})
			}
		}
		add(b.PerOp.NS, "ns/op")
		add(&b.PerOp.Allocs, "allocs/op")
		add(&b.PerOp.AllocBytes, "B/op")
		add(b.PerOp.CopiedBytes, "copied-B/op")
		add(b.PerOp.Syscalls, "syscalls/op")
		add(b.PerOp.RetainedBytes, "retained-B/op")
		add(b.PerOp.GoroutinesLeft, "goroutines-left/op")
		if err := bw.Write(res); err != nil {
			return err
		}
	}
	return nil
}

// TopTable is one profile's largest sites per op, for report.md.
type TopTable struct {
	What      string // the profile's figure ("allocations", "bytes copied")
	Unit      string // of its values, "" for a count
	Rows      []Site
	Value     int   // the index in each site's Values that the table shows
	Total     int64 // every site's, the table's last row
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
	fmt.Fprint(w, ".\n\nns/op is the plain test binary's. Every other figure is counted in the timed region of the run testing reported (from the start or the last ResetTimer, without StopTimer's pauses), divided by its N; -benchmem is testing's own count of that run. Allocations and retained bytes are per op once warm (two warm runs of 1 and N+1 ops after it: the second's counts minus the first's); what the reported run paid beyond that is listed apart, as paid once.\n\n")
	for _, c := range s.Cut {
		fmt.Fprintf(w, "- **Cut:** %s\n", c)
	}
	for _, b := range s.Blind {
		fmt.Fprintf(w, "- %s\n", b)
	}
	fmt.Fprint(w, "\n| benchmark | N | ns/op | allocs/op | B/op | -benchmem allocs/op | -benchmem B/op | copied B/op | syscalls/op | retained B/op | goroutines left/op |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, b := range s.Benchmarks {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", b.Name, b.N, fmtPtr(b.PerOp.NS, 2),
			fmtFloat(b.PerOp.Allocs, 4), fmtFloat(b.PerOp.AllocBytes, 2), fmtFloat(b.Benchmem.Allocs, 4), fmtFloat(b.Benchmem.Bytes, 2),
			fmtPtr(b.PerOp.CopiedBytes, 2), fmtPtr(b.PerOp.Syscalls, 4), fmtPtr(b.PerOp.RetainedBytes, 2), fmtPtr(b.PerOp.GoroutinesLeft, 4))
	}
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
			fmt.Fprintf(w, "\n%s per op (of %d ops):\n\n| per op | site |\n|---:|---|\n", t.What, b.N)
			for _, r := range t.Rows {
				fmt.Fprintf(w, "| %s | %s |\n", perOp(r.Values[t.Value], b.N, t.Unit), r.Func)
			}
			fmt.Fprintf(w, "| %s | (remainder: the other sites) |\n| %s | total |\n", perOp(t.Remainder, b.N, t.Unit), perOp(t.Total, b.N, t.Unit))
		}
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
		fmt.Fprintf(w, "%s  %s ns/op  %s allocs/op  %s B/op  %s copied-B/op  %s syscalls/op", b.Name, fmtPtr(b.PerOp.NS, 2),
			fmtFloat(b.PerOp.Allocs, 4), fmtFloat(b.PerOp.AllocBytes, 2), fmtPtr(b.PerOp.CopiedBytes, 2), fmtPtr(b.PerOp.Syscalls, 4))
		if b.PerOp.RetainedBytes != nil {
			fmt.Fprintf(w, "  %s retained-B/op  %s goroutines-left/op", fmtPtr(b.PerOp.RetainedBytes, 2), fmtPtr(b.PerOp.GoroutinesLeft, 4))
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
		fmt.Fprintf(w, "    allocs      %s /op, %s B/op%s  [%s]; -benchmem %s /op, %s B/op\n", fmtFloat(b.PerOp.Allocs, 4), fmtFloat(b.PerOp.AllocBytes, 2), steadyWords(b), s.Sources["allocs"], fmtFloat(b.Benchmem.Allocs, 4), fmtFloat(b.Benchmem.Bytes, 2))
		if line := OnceLine(b); line != "" {
			fmt.Fprintf(w, "    paid once   %s\n", line)
		}
		if b.CountsDiffer != "" {
			fmt.Fprintf(w, "    go test     %s\n", b.CountsDiffer)
		}
		fmt.Fprintf(w, "    copies      %s B/op copied, %s B/op cleared  [%s]\n", fmtPtr(b.PerOp.CopiedBytes, 2), fmtPtr(b.PerOp.ClearedBytes, 2), s.Sources["copies"])
		fmt.Fprintf(w, "    syscalls    %s /op%s  [%s]\n", fmtPtr(b.PerOp.Syscalls, 4), byName(b.PerOp.SyscallsByName), s.Sources["syscalls"])
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

// writeBenchRetained writes what a benchmark's ops left: one line, and
// the top sites and goroutines when it is not nothing.
func writeBenchRetained(w io.Writer, b schema.BenchFigures) {
	if b.PerOp.RetainedBytes == nil {
		return
	}
	fmt.Fprintf(w, "    retained    %s objects/op, %s B/op live after the run; goroutines left %s /op  [retained run]\n",
		fmtPtr(b.PerOp.RetainedObjects, 4), fmtPtr(b.PerOp.RetainedBytes, 2), fmtPtr(b.PerOp.GoroutinesLeft, 4))
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

// benchUnits are the figures probe ab compares for each benchmark, in the
// report's order (the metric table's).
var benchUnits = metric.Compare("op")

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

// writeOnce writes report.md's table of what a result paid once, when it
// paid anything once.
func writeOnce(w io.Writer, b schema.BenchFigures) {
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
