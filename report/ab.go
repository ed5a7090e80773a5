package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/schema"
)

// ShortCommit is a commit as the pages show it: its first 12 digits.
func ShortCommit(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// BenchLines writes a run's result line and unit lines, as bench.txt
// does, without its configuration lines.
func BenchLines(w io.Writer, s *schema.Summary, name string) {
	var b bytes.Buffer
	RunBenchText(&b, s, name, nil)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "Unit ") {
			fmt.Fprintln(w, line)
		}
	}
}

// AB is what probe ab's report.md and report.html are made of.
type AB struct {
	Result        *schema.ABResult
	Before, After string   // the arms' names
	Metrics       []string // the metrics compared, in the report's order
	Per           string   // "request", or "op" for benchmarks
	Config        string   // how the arms were measured and what counts as a change (markdown)
}

// Markdown writes report.md: the table a reviewer pastes.
func (a *AB) Markdown(w io.Writer) {
	r := a.Result
	fmt.Fprintf(w, "# probe ab: %s → %s\n\n", r.Before["rev"], r.After["rev"])
	fmt.Fprintf(w, "%s → %s, %d rounds per arm, order %s", safetext.Code(a.Before), safetext.Code(a.After), r.Rounds, r.Order)
	if !r.Judged {
		fmt.Fprintf(w, ", **not judged**: %s", strings.Join(r.Reasons, "; "))
	}
	fmt.Fprint(w, "\n\n| metric | before | after | delta | delta % | p | verdict |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, name := range a.Metrics {
		x := r.Metrics[name]
		v := x.Verdict
		if x.Why != "" {
			v += " (" + x.Why + ")"
		}
		fmt.Fprintf(w, "| %s | %.4g | %.4g | %+.4g | %+.2f%% | %.3f | %s |\n", name, x.Before, x.After, x.Delta, x.DeltaPct, x.P, v)
	}
	if len(r.Gate) > 0 {
		fmt.Fprintf(w, "\n**Gate failed:** %s\n", strings.Join(r.Gate, "; "))
	}
	cur := ""
	for _, f := range r.Functions {
		if f.Profile != cur {
			cur = f.Profile
			what := ""
			if f.Sample != "" {
				what = fmt.Sprintf(" (%s, %s)", f.Sample, f.Unit)
			}
			fmt.Fprintf(w, "\n## %s%s: top function changes per %s\n\n| function | before | after | delta |\n|---|---:|---:|---:|\n", cur, what, a.Per)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %+.2f |\n", safetext.Code(f.Key), f.Before, f.After, f.Delta)
	}
	writeTailTable(w, r.Tail)
	writeScopes(w, r, a.Per)
	fmt.Fprintf(w, "\n## Configuration\n\n%s\n", a.Config)
}

//go:embed assets/ab.html.tmpl
var abPageText string

var abPage = template.Must(template.New("ab").Parse(abPageText))

// HTML is report.html, a page of its own: the metric and function tables
// as HTML tables, regressions and improvements marked, the differential
// flame graph full width, nothing loaded from elsewhere.
func (a *AB) HTML(svg []byte) ([]byte, error) {
	r := a.Result
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
	}{Before: r.Before["rev"], After: r.After["rev"], BeforeCommit: ShortCommit(r.Before["commit"]), AfterCommit: ShortCommit(r.After["commit"]),
		Order: r.Order, Reasons: strings.Join(r.Reasons, "; "), Gate: strings.Join(r.Gate, "; "), Rounds: r.Rounds, Judged: r.Judged,
		Config: a.Config, Per: a.Per}
	for _, name := range a.Metrics {
		x := r.Metrics[name]
		if x.Verdict == "regression" {
			page.Regressions++
		}
		page.Metrics = append(page.Metrics, metricRow{name, fmt.Sprintf("%.4g", x.Before), fmt.Sprintf("%.4g", x.After), fmt.Sprintf("%+.4g", x.Delta),
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

// writeScopes says, per profile, how much of the change is the runtime's,
// the rest of the standard library's and the user's code (every function,
// not only the rows listed): what a toolchain upgrade moves.
func writeScopes(w io.Writer, r *schema.ABResult, per string) {
	if len(r.Scopes) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Whose code changed, per %s\n\n| profile | runtime | standard library | user code |\n|---|---:|---:|---:|\n", per)
	for _, p := range slices.Sorted(maps.Keys(r.Scopes)) {
		s := r.Scopes[p]
		fmt.Fprintf(w, "| %s | %+.2f | %+.2f | %+.2f |\n", safetext.Markdown(p), s[schema.ScopeRuntime], s[schema.ScopeStd], s[schema.ScopeUser])
	}
}

// Costs are a window's functions by their own cost, largest first, and
// their total.
type Costs struct {
	Rows  []Cost
	Total int64
}

// Cost is one function's. Bytes marks the functions whose count is really
// bytes (callgrind charges rep movsb one instruction per byte).
type Cost struct {
	Func  string
	Cost  int64
	Bytes bool
}

// Instructions writes an instructions run's report.md: the instructions
// per request, the functions that ran most, the sysmon's share apart.
func Instructions(w io.Writer, s *schema.Summary, win Costs, n int64) {
	fmt.Fprintf(w, "# perfspy: %s, instructions\n\n", s.Target)
	fmt.Fprintf(w, "%.2f instructions per request (callgrind, %d requests between two dumps; the load is bounded by a count, not by seconds, since the target runs about 50 times slower).\n\n", *s.PerRequest.Instructions, n)
	fmt.Fprint(w, "| function | instructions per request |\n|---|---:|\n")
	var shown int64
	for i, row := range win.Rows {
		if i == TopSites {
			break
		}
		shown += row.Cost
		note := ""
		if row.Bytes {
			note = " (bytes, not time: rep movsb counts one per byte)"
		}
		fmt.Fprintf(w, "| %s%s | %.2f |\n", safetext.Code(row.Func), note, float64(row.Cost)/float64(n))
	}
	fmt.Fprintf(w, "| other | %.2f |\n| **total** | %.2f |\n", float64(win.Total-shown)/float64(n), float64(win.Total)/float64(n))
	fmt.Fprintf(w, "\nThe figure is the total less `runtime.sysmon` (%.2f per request): the runtime's monitor thread runs on a clock, and under callgrind its cost follows the window's wall time, not the requests. The build keeps it asleep unless a timer falls due.\n",
		s.Checks["instructions_sysmon_per_req"])
}
