package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/schema"
)

// TestPlantedRow: a row planted in metric's table, with no other change,
// is in every writer: report.md's figures, the terminal's line of its
// source, bench.txt (exact, so marked), and per op in probe run -bench's
// bench.txt, report.md table and terminal lines. Not parallel: it swaps
// the table (parallel tests run after it).
func TestPlantedRow(t *testing.T) {
	saved := metric.Table
	defer func() { metric.Table = saved }()
	metric.Table = append(slices.Clone(metric.Table), metric.Metric{Name: "planted", Per: []string{"req", "op"}, Unit: "widgets",
		Judged: metric.Exact, HigherWorse: true, Compared: true, Summary: "per_request.alloc_blocks", BenchSummary: "per_op.alloc_bytes",
		Source: "a planted row", Label: "planted widgets", SourceKey: "widgets", Window: "attribution_window", Digits: 1, Bench: true})

	r := fullReport()
	r.Summary.PerRequest.AllocBlocks = f64(3.25)
	r.Summary.Sources["widgets"] = "widget-counter"
	r.Dir = "out"
	var md, term, bench bytes.Buffer
	r.Markdown(&md)
	r.Terminal(&term)
	if err := RunBenchText(&bench, r.Summary, "x", nil); err != nil {
		t.Fatal(err)
	}
	hasAll(t, map[string][2]string{
		"report.md":       {md.String(), "| planted widgets | 3.2 | widget-counter, attribution window, 50000 requests |"},
		"terminal":        {term.String(), "  widgets       3.2 planted/req  [widget-counter]"},
		"bench.txt":       {bench.String(), " 3.25 planted/req"},
		"bench.txt units": {bench.String(), "Unit planted/req assume=exact"},
	})

	bs := &schema.BenchSummary{Target: "pkg", Sources: map[string]string{"widgets": "widget-counter"},
		Benchmarks: []schema.BenchFigures{{Name: "BenchmarkX", N: 10, PerOp: schema.BenchPerOp{AllocBytes: 48}}}}
	var bmd, bterm, btxt bytes.Buffer
	o := &Bench{Summary: bs, Dir: "out"}
	o.Markdown(&bmd)
	o.Terminal(&bterm)
	if err := BenchText(&btxt, bs); err != nil {
		t.Fatal(err)
	}
	hasAll(t, map[string][2]string{
		"bench report.md":     {bmd.String(), " planted/op |"},
		"bench report.md row": {bmd.String(), " 48.000 |"},
		"bench terminal":      {bterm.String(), "widgets     48.000 planted/op  [widget-counter]"},
		"bench bench.txt":     {btxt.String(), " 48 planted/op"},
		"bench units":         {btxt.String(), "Unit planted/op assume=exact"},
	})
}

// hasAll checks that each writer's output (what: {output, line}) holds
// its line.
func hasAll(t *testing.T, outputs map[string][2]string) {
	t.Helper()
	for what, want := range outputs {
		if !strings.Contains(want[0], want[1]) {
			t.Errorf("%s has no %q:\n%s", what, want[1], want[0])
		}
	}
}

// TestUnmeasured: a source that measured none of its figures gets one
// line saying why, in report.md and on the terminal, never a zero.
func TestUnmeasured(t *testing.T) {
	t.Parallel()
	r := fullReport()
	r.Summary.PerRequest.CopyCalls, r.Summary.PerRequest.CopiedBytes, r.Summary.PerRequest.ClearCalls, r.Summary.PerRequest.ClearedBytes = nil, nil, nil, nil
	r.Summary.Sources["copies"] = "none: -copies off"
	var md, term bytes.Buffer
	r.Markdown(&md)
	r.Terminal(&term)
	if !strings.Contains(md.String(), "| copies | n/a | none: -copies off |") || !strings.Contains(term.String(), "  copies        n/a  [none: -copies off]") {
		t.Errorf("report.md:\n%s\nterminal:\n%s", md.String(), term.String())
	}
}

// TestBenchGolden: probe run -bench's report.md, terminal lines and
// bench.txt from a fixed summary.
func TestBenchGolden(t *testing.T) {
	t.Parallel()
	ns, copied, sys, ret, left := 1520.5, 4096.0, 0.0, 48.0, 0.0
	s := &schema.BenchSummary{Target: "./pkg", Commit: "abc123", Go: "go1.26.8", Bench: ".", Count: 1,
		Sources: map[string]string{"allocs": "allocspy+benchwin", "copies": "copyspy-overlay+benchwin", "syscalls": "bpf-tracepoint+benchwin-gate",
			"retained": "heapprofile-rate1-live+benchwin", "goroutines_left": "goroutine-dump+benchwin"},
		Benchmarks: []schema.BenchFigures{{Name: "BenchmarkEncode-2", N: 100000, PerOp: schema.BenchPerOp{NS: &ns, Allocs: 3, AllocBytes: 4144, CopiedBytes: &copied,
			Syscalls: &sys, SyscallsByName: map[string]float64{}, RetainedBytes: &ret, GoroutinesLeft: &left}, Benchmem: schema.BenchMem{Allocs: 3, Bytes: 4144}}}}
	var b bytes.Buffer
	o := &Bench{Summary: s, Dir: "out"}
	o.Markdown(&b)
	b.WriteString("\n---- terminal\n")
	o.Terminal(&b)
	b.WriteString("---- bench.txt\n")
	if err := BenchText(&b, s); err != nil {
		t.Fatal(err)
	}
	golden(t, "bench-run.golden.txt", b.Bytes())
}
