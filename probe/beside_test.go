package probe

import (
	"math"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/schema"
)

// TestCountsDifferBeside: at the same b.N, go test's line and the counted
// run's differ by what the timed region allocated beside the ops (another
// goroutine's, the runtime's): the reason measures it from the counted
// run's profile and names where, instead of "the op's cost depends on
// b.N" (said when both runs had b.N = 2000).
func TestCountsDifferBeside(t *testing.T) {
	fn := func(id uint64, name string) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: &profile.Function{ID: id, Name: name}}}}
	}
	op, runner, bg, malg := fn(1, "example.com/x.BenchmarkOp"), fn(2, runN), fn(3, "example.com/x.background"), fn(4, "runtime.malg")
	p := &profile.Profile{Sample: []*profile.Sample{
		{Location: []*profile.Location{op, runner}, Value: []int64{2000, 96000}},
		{Location: []*profile.Location{bg}, Value: []int64{30, 40960}},
		{Location: []*profile.Location{malg}, Value: []int64{2, 512}},
	}}
	b := besideOf(p)
	if b.allocs != 32 || b.bytes != 41472 || b.top != "example.com/x.background" {
		t.Fatalf("beside the ops: %+v, want 32 allocs, 41472 B, most in example.com/x.background", b)
	}
	f := &schema.BenchFigures{}
	why := countsDifferWhy(f, 2000, 2000, b)
	for _, want := range []string{"32 allocs, 41472 B beside its ops", "most in example.com/x.background", "20.74 B an op"} {
		if !strings.Contains(why, want) {
			t.Errorf("same b.N: %q lacks %q", why, want)
		}
	}
	if strings.Contains(why, "depends on b.N") {
		t.Errorf("same b.N: %q blames b.N", why)
	}
	if why := countsDifferWhy(f, 2000, 2000, besideOps{}); strings.Contains(why, "depends on b.N") || !strings.Contains(why, "go test's run did work beside its ops") {
		t.Errorf("same b.N, nothing beside: %q", why)
	}
	// With a steady state, the same b.N names what the run paid beside
	// its ops' steady cost, by its largest site.
	st := &schema.BenchFigures{Steady: &schema.BenchSteady{OnceAllocs: 295, OnceBytes: 60504, OnceSites: []schema.OnceSite{{Func: "regexp.(*bitState).reset", Allocs: 2, Bytes: 36864}}}}
	if why := countsDifferWhy(st, 2000, 2000, besideOps{}); !strings.Contains(why, "295 allocs and 60504 B") || !strings.Contains(why, "most at regexp.(*bitState).reset") || strings.Contains(why, "go test's run did work beside its ops") {
		t.Errorf("same b.N, paid once: %q", why)
	}
	if why := countsDifferWhy(f, 5000, 2000, besideOps{}); !strings.Contains(why, "depends on b.N") {
		t.Errorf("another b.N, nothing beside: %q", why)
	}
}

// TestBusyOpenLoop: an open-loop window whose target or driver waited
// for a CPU 150 µs a request or more (and half its own CPU) while other
// processes used half a core or more is the machine's, even when the waits per second stay under the closed loop's
// bound (the target is idle by design under -rate); an idle machine's
// waits are not. The figures are targets/floor's, measured.
func TestBusyOpenLoop(t *testing.T) {
	other := 0.0
	run := func(rps, serverWait, cpuUS, driverWait, driverUS float64) string {
		// A window of 2 s.
		o := &runOutput{s: &schema.Summary{Window: schema.WindowSummary{RPS: rps, Requests: int64(math.Ceil(2 * rps))}, PerRequest: schema.PerRequest{CPUUS: &cpuUS}, Driver: &schema.DriverSummary{CPUUS: driverUS},
			Machine: &schema.MachineSummary{ServerRunQueueWait: serverWait, DriverRunQueueWait: driverWait, OtherCores: other, Busy: serverWait >= BusyMachineWait || driverWait >= BusyMachineWait}}}
		return o.busyOpenLoop()
	}
	for _, idle := range [][5]float64{{100, 0.008, 126, 0.005, 190}, {500, 0.027, 76, 0.02, 148}, {2000, 0.055, 39, 0.063, 100}, {8000, 0.156, 23, 0.093, 38},
		{3000, 0.35, 143, 0.14, 60}} { // the last: probetarget's /spin, its own threads contending for its core
		if why := run(idle[0], idle[1], idle[2], idle[3], idle[4]); why != "" {
			t.Errorf("an idle machine at %.0f req/s: %q", idle[0], why)
		}
	}
	other = 1.9
	if why := run(100, 0.141, 126, 0.078, 240); !strings.Contains(why, "the target waited for a CPU 1410 µs a request, the load driver 780 µs") {
		t.Errorf("a busy machine at 100 req/s: %q", why)
	}
	if why := run(2000, 0.634, 42, 0.417, 88); why == "" {
		t.Error("a busy machine at 2000 req/s: not named")
	}
	if why := run(100, 0.03, 2000, 0.005, 190); why != "" {
		t.Errorf("a heavy request's own threads waiting 300 µs of its 2000: %q", why)
	}
	// -rate 0.5: 1 request in the window. A wait of 0.1 s a second is
	// 200,000 µs a request, but of one request: no busy reason (the
	// window is not judged for its requests).
	if why := run(0.5, 0.1, 100, 0.1, 100); why != "" {
		t.Errorf("a busy reason from 1 request: %q", why)
	}
}

// TestMachineBusyNeedsOthers: waits for a CPU with no other process at
// work are the target's or the driver's own threads contending for the
// CPUs they were given (the lean driver's 0.35 s a second on its core, on
// an idle machine): not a busy machine.
func TestMachineBusyNeedsOthers(t *testing.T) {
	w := &windowResult{runqWait: 10_000_000, machine: proc.MachineWindow{DriverWait: 0.35, BusyCores: 0.99 + 0.68, Pressure: -1}}
	if m := machineSummary(w, 0.99, 0.68, 1); m.Busy {
		t.Errorf("the driver's own contention, other processes %.2f cores: busy", m.OtherCores)
	}
	w.machine.BusyCores += 1.8
	if m := machineSummary(w, 0.99, 0.68, 1); !m.Busy {
		t.Errorf("other processes %.2f cores and the driver waiting 0.35 s a second: not busy", m.OtherCores)
	}
}
