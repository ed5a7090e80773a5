package probe

// The rendering of probe ab: report.md, report.html and the
// differential flame graph.

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/flame"
	"github.com/perfspy/perfspy/internal/safetext"
)

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// writeBenchLine writes a run's result line, as bench.txt does.
func writeBenchLine(w io.Writer, s *Summary, name string) {
	var b bytes.Buffer
	writeBench(&b, s, name, nil)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "Unit ") {
			fmt.Fprintln(w, line)
		}
	}
}

// diffFlame draws the allocation profiles' differential flame graph (SVG).
func diffFlame(before, after []string) []byte {
	// One file per arm is enough to show the shape: the first round's.
	b, err1 := os.Open(before[0])
	a, err2 := os.Open(after[0])
	if err1 != nil || err2 != nil {
		return nil
	}
	defer b.Close()
	defer a.Close()
	t, err := flame.ReadDiff(b, a, flame.Options{})
	if err != nil {
		return nil
	}
	var buf bytes.Buffer
	if flame.WriteSVG(&buf, t, flame.SVGOptions{Title: "allocations: after vs before"}) != nil {
		return nil
	}
	return buf.Bytes()
}

// writeABReport writes the table a reviewer pastes.
func writeABReport(w io.Writer, r *ABResult, cfg ABConfig) {
	fmt.Fprintf(w, "# probe ab: %s → %s\n\n", r.Before["rev"], r.After["rev"])
	fmt.Fprintf(w, "%s → %s, %d rounds per arm, order %s", safetext.Code(r.armName("before")), safetext.Code(r.armName("after")), r.Rounds, r.Order)
	if !r.Judged {
		fmt.Fprintf(w, ", **not judged**: %s", strings.Join(r.Reasons, "; "))
	}
	fmt.Fprint(w, "\n\n| metric | before | after | delta | delta % | p | verdict |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, m := range r.metricList(cfg) {
		x := r.Metrics[m.name]
		v := x.Verdict
		if x.Why != "" {
			v += " (" + x.Why + ")"
		}
		fmt.Fprintf(w, "| %s | %.4g | %.4g | %+.4g | %+.2f%% | %.3f | %s |\n", m.name, x.Before, x.After, x.Delta, x.DeltaPct, x.P, v)
	}
	if len(r.Gate) > 0 {
		fmt.Fprintf(w, "\n**Gate failed:** %s\n", strings.Join(r.Gate, "; "))
	}
	cur := ""
	for _, f := range r.Functions {
		if f.Profile != cur {
			cur = f.Profile
			per := "request"
			if cfg.Bench.Bench != "" {
				per = "op"
			}
			what := ""
			if f.Sample != "" {
				what = fmt.Sprintf(" (%s, %s)", f.Sample, f.Unit)
			}
			fmt.Fprintf(w, "\n## %s%s: top function changes per %s\n\n| function | before | after | delta |\n|---|---:|---:|---:|\n", cur, what, per)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %+.2f |\n", safetext.Code(f.Key), f.Before, f.After, f.Delta)
	}
	writeScopes(w, r, cfg)
	fmt.Fprintf(w, "\n## Configuration\n\n%s\n", abConfigLine(cfg))
}

// abConfigLine says how the arms were measured and what counts as a change.
func abConfigLine(cfg ABConfig) string {
	if r := cfg.Bench; r.Bench != "" {
		bt := r.BenchTime
		if bt == "" {
			bt = "1s"
		}
		return fmt.Sprintf("package %s, benchmarks %s; ns/op from the plain test binary, every other figure counted in each benchmark's timed region per op; counts are exact (a change beyond 0.5%% is one); ns/op and syscalls/op need p < 0.05 (Mann-Whitney U) and more than 2%%.",
			safetext.Code(r.Target), safetext.Code(fmt.Sprintf("-bench %s -benchtime %s -count %d", r.Bench, bt, max(r.Count, 1))))
	}
	if cfg.Run.Instructions {
		return fmt.Sprintf("target %s, instructions under callgrind, %d requests per window, cpus %s; a change is one when the arms' runs do not overlap and the medians differ by more than 0.1%% and by more than twice the wider arm's spread.",
			safetext.Code(cfg.Run.Target), cfg.Run.Requests, safetext.Markdown(cfg.Run.CPUs))
	}
	return fmt.Sprintf("target %s, duration %v, warm-up %v, conns %s, cpus %s; counts are exact (a change beyond 0.5%% is one); timings need p < 0.05 (Mann-Whitney U) and more than 2%%.",
		safetext.Code(cfg.Run.Target), cfg.Run.Duration, cfg.Run.Warmup, connsName(cfg.Run.Conns), safetext.Markdown(cfg.Run.CPUs))
}

//go:embed assets/ab.html.tmpl
var abPageText string

var abPage = template.Must(template.New("ab").Parse(abPageText))

// abHTML is report.html, a page of its own: the metric and function tables
// as HTML tables, regressions and improvements marked, the differential
// flame graph full width, nothing loaded from elsewhere.
func abHTML(r *ABResult, cfg ABConfig, svg []byte) ([]byte, error) {
	type metricRow struct {
		Name, Before, After, Delta, DeltaPct, P, Verdict, Why string
	}
	type fnRow struct{ Key, Before, After, Delta, Class string }
	type profileRows struct {
		Name string
		Rows []fnRow
	}
	page := struct {
		Before, After, BeforeCommit, AfterCommit, Order, Reasons, Gate, Config, Per string
		Rounds, Regressions                                                         int
		Judged                                                                      bool
		Metrics                                                                     []metricRow
		Profiles                                                                    []profileRows
		Flame                                                                       template.HTML
	}{Before: r.Before["rev"], After: r.After["rev"], BeforeCommit: short(r.Before["commit"]), AfterCommit: short(r.After["commit"]),
		Order: r.Order, Reasons: strings.Join(r.Reasons, "; "), Gate: strings.Join(r.Gate, "; "), Rounds: r.Rounds, Judged: r.Judged,
		Config: abConfigLine(cfg), Per: "request"}
	if cfg.Bench.Bench != "" {
		page.Per = "op" // a benchmark's figures are per op, everywhere
	}
	for _, m := range r.metricList(cfg) {
		x := r.Metrics[m.name]
		if x.Verdict == "regression" {
			page.Regressions++
		}
		page.Metrics = append(page.Metrics, metricRow{m.name, fmt.Sprintf("%.4g", x.Before), fmt.Sprintf("%.4g", x.After), fmt.Sprintf("%+.4g", x.Delta),
			fmt.Sprintf("%+.2f%%", x.DeltaPct), fmt.Sprintf("%.3f", x.P), x.Verdict, x.Why})
	}
	for _, f := range r.Functions {
		name := f.Profile
		if f.Sample != "" {
			name += fmt.Sprintf(" (%s, %s)", f.Sample, f.Unit)
		}
		if n := len(page.Profiles); n == 0 || page.Profiles[n-1].Name != name {
			page.Profiles = append(page.Profiles, profileRows{Name: name})
		}
		class := "better"
		if f.Delta > 0 {
			class = "worse"
		}
		p := &page.Profiles[len(page.Profiles)-1]
		p.Rows = append(p.Rows, fnRow{f.Key, fmt.Sprintf("%.2f", f.Before), fmt.Sprintf("%.2f", f.After), fmt.Sprintf("%+.2f", f.Delta), class})
	}
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		page.Flame = template.HTML(svg[i:]) // flame writes it, escaped
	}
	var b bytes.Buffer
	// html/template escapes markup; the writer escapes what no page
	// should carry raw (control characters, bidirectional overrides).
	if err := abPage.Execute(safetext.NewWriter(&b), page); err != nil {
		return nil, fmt.Errorf("report.html: %w", err)
	}
	return b.Bytes(), nil
}

// connsName is -conns as the report says it: 0 is the driver's default.
func connsName(n int) string {
	if n == 0 {
		return "the driver's default"
	}
	return strconv.Itoa(n)
}

// writeScopes says, per profile, how much of the change is the runtime's,
// the rest of the standard library's and the user's code (every function,
// not only the rows listed): what a toolchain upgrade moves.
func writeScopes(w io.Writer, r *ABResult, cfg ABConfig) {
	if len(r.Scopes) == 0 {
		return
	}
	per := "request"
	if cfg.Bench.Bench != "" {
		per = "op"
	}
	fmt.Fprintf(w, "\n## Whose code changed, per %s\n\n| profile | runtime | standard library | user code |\n|---|---:|---:|---:|\n", per)
	for _, p := range slices.Sorted(maps.Keys(r.Scopes)) {
		s := r.Scopes[p]
		fmt.Fprintf(w, "| %s | %+.2f | %+.2f | %+.2f |\n", safetext.Markdown(p), s[ScopeRuntime], s[ScopeStd], s[ScopeUser])
	}
}
