package probe

import (
	"errors"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/schema"
)

// TestPaceReason: a server that did not use its cores was paced by a busy
// driver, or waited with a driver that was not busy either (a sleeping
// handler): the reason says which, with both sides' figures.
func TestPaceReason(t *testing.T) {
	o := &runOutput{ses: &session{plan: proc.CPUPlan{Load: []int{1}}, coresHad: 1},
		s: &schema.Summary{ServerCores: 0.29, PerRequest: schema.PerRequest{CPUUS: f64(108.47)}, Driver: &schema.DriverSummary{Name: "nethttp", CPUUS: 70.38, CoresUsed: 0.19}}}
	for _, tc := range []struct {
		driverCores float64
		want        string
	}{
		{0.19, "the target used 0.29 of its 1 cores (< 90%), and the load driver was not busy either (driver nethttp 70.38 µs/req on 0.19 cores, server 108.47 µs/req)"},
		{0.97, "the target used 0.29 of its 1 cores (< 90%): the load driver, not the server, set the pace (driver nethttp 70.38 µs/req on 0.97 cores, server 108.47 µs/req)"},
	} {
		o.s.Driver.CoresUsed = tc.driverCores
		if got := o.paceReason(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("driver on %.2f cores: %q, want %q...", tc.driverCores, got, tc.want)
		}
	}
}

// TestJudgeCounts: a server the driver paced (a 2-core or busy machine)
// has its timings not judged and its counts judged, told apart in
// summary.json's judged and by -judge counts's exit; too few requests are
// the counts' reason too, and no -judge passes them. The error is one
// line that does not repeat the reasons the verdict printed.
func TestJudgeCounts(t *testing.T) {
	run := func(ok int64) (*runOutput, *schema.Summary) {
		w := &windowResult{load: &load.Result{OK: ok}}
		o := &runOutput{ses: &session{plan: proc.CPUPlan{Load: []int{1}}, coresHad: 1}, win: windows{clean: w, attr: w},
			s: &schema.Summary{ServerCores: 0.29, PerRequest: schema.PerRequest{CPUUS: f64(108.47)}, Driver: &schema.DriverSummary{Name: "lean", CPUUS: 90, CoresUsed: 0.97}}}
		o.reasons = append(o.reasons, windowReasons(o.named(), o.minRequests())...)
		o.timing = append(o.timing, o.timingReasons()...)
		if err := o.judge(); err != nil {
			t.Fatal(err)
		}
		return o, o.s
	}
	_, s := run(5000)
	if s.Verdict != VerdictNotJudged || s.Judged == nil || !s.Judged.Counts || s.Judged.Timing || len(s.Judged.TimingReasons) != 1 || len(s.Reasons) != 1 {
		t.Fatalf("a paced server: verdict %s, judged %+v, reasons %q; want not-judged, counts judged, timing not, one reason", s.Verdict, s.Judged, s.Reasons)
	}
	all, counts := &Config{OutputConfig: OutputConfig{Judge: "all"}}, &Config{OutputConfig: OutputConfig{Judge: "counts"}}
	if err := counts.judgeExit(s); err != nil {
		t.Errorf("-judge counts on exact counts: %v, want exit 0", err)
	}
	err := all.judgeExit(s)
	if !errors.Is(err, ErrNotJudged) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "0.29") || !strings.Contains(err.Error(), "-judge counts") {
		t.Errorf("-judge all: %v; want ErrNotJudged in one line, naming -judge counts, without repeating the reason", err)
	}
	_, s = run(7)
	if s.Judged.Counts || !strings.HasPrefix(s.Reasons[0], "too few successful requests") {
		t.Fatalf("7 requests: judged %+v, reasons %q; want the counts not judged, their reason first", s.Judged, s.Reasons)
	}
	if err := counts.judgeExit(s); !errors.Is(err, ErrNotJudged) || !strings.Contains(err.Error(), "the counts (1 reason above)") {
		t.Errorf("-judge counts on too few requests: %v, want ErrNotJudged naming the counts", err)
	}
}
