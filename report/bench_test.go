package report

import (
	"strings"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestBenchTerminalOffCPU: a benchmark that waited says how, one that
// did not says so, and one not traced has no off-CPU line.
func TestBenchTerminalOffCPU(t *testing.T) {
	s := &schema.BenchSummary{Target: "pkg", Sources: map[string]string{"offcpu": "trace"}, Benchmarks: []schema.BenchFigures{
		{Name: "BenchmarkWaits", N: 10, PerOp: schema.BenchPerOp{OffCPUNS: map[string]float64{"sleep": 50000}}},
		{Name: "BenchmarkBusy", N: 10, PerOp: schema.BenchPerOp{OffCPUNS: map[string]float64{}}},
		{Name: "BenchmarkUntraced", N: 10},
	}}
	var b strings.Builder
	(&Bench{Dir: "out", Summary: s}).Terminal(&b)
	out := b.String()
	for _, want := range []string{"off-CPU     50000 ns/op (sleep 50000)  [trace]", "off-CPU     no wait ended in the timed region  [trace]"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "off-CPU"); n != 2 {
		t.Errorf("%d off-CPU lines, want 2:\n%s", n, out)
	}
}

// TestBenchTerminalQuiet: -q prints one line per benchmark.
func TestBenchTerminalQuiet(t *testing.T) {
	s := &schema.BenchSummary{Benchmarks: []schema.BenchFigures{{Name: "BenchmarkA", N: 10}, {Name: "BenchmarkB", N: 10}}}
	var b strings.Builder
	(&Bench{Dir: "out", Summary: s}).TerminalQuiet(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "BenchmarkA  ") || lines[2] != "results out" {
		t.Errorf("%q", lines)
	}
}
