package report

import (
	"bytes"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestSweepReportGolden: probe bulk's md from a fixed sweep.
func TestSweepReportGolden(t *testing.T) {
	t.Parallel()
	cell := func(cpu, dg, sys float64) schema.SweepCell {
		return schema.SweepCell{CPUUSPerMB: cpu, DatagramsPerRequest: dg, SyscallsPerDatagram: sys, Rounds: []float64{cpu, cpu * 1.02}}
	}
	r := &schema.SweepResult{Schema: schema.SweepSchema, Target: "targets/quicecho", Rounds: 3, Judged: false,
		Reasons: []string{"64K quicecho echo round 2 not judged: the target used 0.71 of its 1 cores (< 90%)"},
		Rows: []schema.SweepRow{
			{Size: 64 << 10, Push: cell(5400, 58.2, 0.31), Echo: cell(9800, 116.5, 0.29), Floor: cell(1900, 53, 1), PushRatio: 2.842, EchoRatio: 5.158},
			{Size: 1 << 20, Push: cell(4100, 840.1, 0.22), Echo: cell(7900, 1680.3, 0.21), Floor: cell(1700, 840, 1), PushRatio: 2.412, EchoRatio: 4.647},
		}}
	var b bytes.Buffer
	Sweep(&b, r)
	golden(t, "bulk-report.golden.md", b.Bytes())
}

// TestInstructionsReportGolden: md of probe run -instructions from
// a fixed callgrind window.
func TestInstructionsReportGolden(t *testing.T) {
	t.Parallel()
	win := Costs{Total: 3400000, Rows: []Cost{{"main.buildDocument", 1200000, false}, {"encoding/json.(*encodeState).string", 900000, false},
		{"runtime.mallocgc", 700000, false}, {"net/http.(*conn).serve", 500000, false}, {"runtime.sysmon", 100000, false}}}
	s := &schema.Summary{Target: "./targets/httpjson", PerRequest: schema.PerRequest{Instructions: f64(330000)},
		Checks: map[string]float64{"instructions_total_per_req": 340000, "instructions_scheduler_idle_per_req": 2100, "instructions_sysmon_per_req": 10000}}
	var b bytes.Buffer
	Instructions(&b, s, win, 10)
	golden(t, "instructions-report.golden.md", b.Bytes())
}
