package probe

import (
	"bytes"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/syscalls"
)

// fullSummary is a run with every figure: the build check, copies, syscalls
// by name, the request split, its tail and the background.
func fullSummary() *Summary {
	s := sampleSummary()
	s.Build = &withagent.Check{Binary: "/cache/bin/1/httpjson", Mode: withagent.ModeModule, Modules: 12,
		Added:   []withagent.Module{{Path: "github.com/perfspy/perfspy/agent", Version: "v0.0.0-00010101000000-bbed8d0e0840", Replace: "/cache/agent (devel)"}},
		Changed: []withagent.Change{}}
	s.Driver = &DriverSummary{Name: "lean", CPUUS: 12.4, CoresUsed: 0.62, Source: "getrusage"}
	s.GOMAXPROCS, s.ServerCPUs, s.DriverCPUs = 1, []int{0}, []int{1}
	s.Sources["copies"], s.Sources["syscalls"], s.Sources["offcpu"], s.Sources["allocs"] = SourceCopiesOverlay, syscalls.Source, SourceOffCPU, SourceAllocspy
	s.PerRequest.CopyCalls, s.PerRequest.CopiedBytes = f64(871.62), f64(33804.14)
	s.PerRequest.SyscallsByName = map[string]float64{"read": 2, "write": 1, "epoll_pwait": 0.78, "futex": 0.2}
	s.PerRequest.OffCPUUS = map[string]float64{"net": 0, "sync": 2.9, "syscall": 23.1, "sched": 3.6, "gc": 0.1, "sleep": 0, "other": 0, "net_idle": 0}
	s.PerRequest.RequestUS = map[string]float64{"cpu": 21.4, "net": 0, "sync": 2.9, "syscall": 23.1, "sched": 3.6, "gc": 0.1, "sleep": 0, "other": 0, "net_idle": 0, "total": 51.1}
	s.Checks = map[string]float64{"offcpu_requests": 98000, "request_us_remainder": 0, "driver_latency_mean_us": 390.2, "request_us_driver_gap": 339.1}
	parts := func(sync float64) map[string]float64 {
		return map[string]float64{"cpu": 21, "net": 0, "sync": sync, "syscall": 23, "sched": 3, "gc": 0, "sleep": 0, "other": 0, "net_idle": 0}
	}
	s.Tail = map[string]*TailGroup{
		"p50": {Requests: 9800, TotalUS: 48, PartsUS: parts(1), Top: []WaitRow{{Reason: "syscall", Wait: "syscall", Func: "syscall.write", US: 22.8}}},
		"p99": {Requests: 980, TotalUS: 410, PartsUS: parts(363), Top: []WaitRow{{Reason: "sync", Wait: "chan receive", Func: "main.wait", WokenBy: "main.worker", US: 360}}},
	}
	s.BackgroundOffCPUUS = map[string]float64{"net": 1522.2, "net_idle": 6016427.7, "sync": 949.1, "syscall": 0, "sched": 12, "gc": 0, "sleep": 0, "other": 0}
	s.BackgroundTop = []WaitRow{{Reason: "net_idle", Wait: "network", Func: "internal/poll.(*FD).Read", WokenBy: "runtime", US: 6006800.7}}
	s.Routes = []RouteSummary{
		{Route: "GET /users/{id}", Requests: 30000, Allocs: 150000, AllocBytes: 4860000, CopiedBytes: 4020000, AllocsPerReq: f64(5), AllocBytesPerReq: f64(162), CopiedBytesPerReq: f64(134),
			Sites: []RouteSite{{Func: "main.userAlloc", Allocs: 3, Bytes: 144}, {Func: "net/http.(*routingNode).matchPath", Allocs: 1, Bytes: 16}}, RequestUS: map[string]float64{"total": 31.2}, OffCPURequests: 58000},
		{Route: "GET /json", Requests: 20000, Allocs: 440000, AllocBytes: 17000000, CopiedBytes: 676000000, AllocsPerReq: f64(22), AllocBytesPerReq: f64(850), CopiedBytesPerReq: f64(33800),
			Sites: []RouteSite{{Func: "main.buildDocument", Allocs: 2.5, Bytes: 20480}}},
	}
	s.RoutesBeforeRouting = &RouteSummary{Route: "(before routing)", Requests: 50000, Allocs: 650000, AllocBytes: 70000000, AllocsPerReq: f64(13), AllocBytesPerReq: f64(1400), CopiedBytesPerReq: f64(62)}
	s.RoutesBackground = &RouteSummary{Route: "background", Allocs: 2500, AllocBytes: 320000, AllocsPerSec: f64(500), AllocBytesPerSec: f64(64000), CopiedBytesPerSec: f64(0)}
	s.RoutesClosure = &RoutesClosure{Allocs: 1242500, CopiedBytes: 680020000, RouteRequests: 50000, DriverRequests: 50000, Seconds: 5}
	return s
}

func fullReport() *reportInput {
	s := fullSummary()
	return &reportInput{
		s:        s,
		sites:    []Site{{Func: "net/textproto.readMIMEHeader", Values: []int64{250000, 2360000}}, {Func: "main.buildDocument", Values: []int64{50000, 409600}}},
		requests: 50000, totals: []int64{1125000, 856582500},
		copySites:    []copyspy.Site{{User: "main.buildDocument", Direct: "runtime.growslice", Kind: "memmove", Calls: [4]int64{0, 100000, 0, 0}, Bytes: [4]int64{0, 51200000, 0, 0}}},
		copyRequests: 50000, copyTotal: [2]int64{43581000, 1690207000},
	}
}

// TestReportGolden: report.md from a fixed run, as a reviewer pastes it.
func TestReportGolden(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	fullReport().markdown(&buf)
	golden(t, "report.golden.md", buf.Bytes())
}

// TestTerminalGolden: the lines a run prints at its end.
func TestTerminalGolden(t *testing.T) {
	t.Parallel()
	r := fullReport()
	var buf bytes.Buffer
	WriteTerminal(&buf, &Result{Dir: "results/20261130T170000Z_abc123_httpjson", Summary: r.s, Sites: r.sites})
	golden(t, "terminal.golden.txt", buf.Bytes())
}

// TestPaceReason: a server that did not use its cores was paced by a busy
// driver, or waited with a driver that was not busy either (a sleeping
// handler): the reason says which, with both sides' figures.
func TestPaceReason(t *testing.T) {
	o := &runOutput{ses: &session{plan: CPUPlan{Load: []int{1}}, coresHad: 1},
		s: &Summary{ServerCores: 0.29, PerRequest: PerRequest{CPUUS: f64(108.47)}, Driver: &DriverSummary{Name: "nethttp", CPUUS: 70.38, CoresUsed: 0.19}}}
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
