package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	goldenfile "github.com/perfspy/perfspy/internal/golden"

	"github.com/perfspy/perfspy/schema"
	"github.com/perfspy/perfspy/syscalls"
	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name; on a mismatch it writes got next
// to the golden file, so the two can be diffed.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got, *update)
}

func sampleSummary() *schema.Summary {
	return &schema.Summary{
		Schema: schema.SummarySchema, Target: "./targets/httpjson", Commit: "abc123", Go: "go1.26.8",
		Window: schema.WindowSummary{Seconds: 5, Requests: 100000, RPS: 20000,
			LatencyUS: map[string]int64{"p50": 380, "p99": 1100, "p999": 1600}},
		AttributionWindow: schema.AttributionSummary{Seconds: 5, Requests: 50000, RPS: 10000},
		ServerCores:       0.98, CoresAvailable: 1, Verdict: schema.VerdictServerBound,
		PerRequest: schema.PerRequest{
			Allocs: f64(22.5), AllocBytes: f64(17131.65), Syscalls: f64(4.98), CPUUS: f64(49.5),
			SyscallsByName: map[string]float64{},
		},
		Sources: map[string]string{"allocs": schema.SourceAllocsHeap, "cpu": "schedstat", "syscalls": schema.SourceSyscallsIO, "copies": schema.SourceNone, "offcpu": schema.SourceNone},
		Files:   map[string]string{"allocs": "allocs.pb.gz"},
	}
}

func TestWriteBench(t *testing.T) {
	var buf bytes.Buffer
	cfg := map[string]string{"goos": "linux", "goarch": "amd64", "pkg": "./targets/httpjson", "commit": "abc123"}
	if err := RunBenchText(&buf, sampleSummary(), "httpjson", cfg); err != nil {
		t.Fatal(err)
	}
	golden(t, "bench.golden", buf.Bytes())

	// benchfmt, the reader benchstat uses, is the oracle.
	r := benchfmt.NewReader(bytes.NewReader(buf.Bytes()), "bench.txt")
	var results []*benchfmt.Result
	var units benchfmt.UnitMetadataMap
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.Result:
			results = append(results, rec.Clone())
		case *benchfmt.SyntaxError:
			t.Fatalf("benchfmt: %v", rec)
		}
	}
	units = r.Units()
	if len(results) != 1 {
		t.Fatalf("got %d results, want 1", len(results))
	}
	res := results[0]
	if string(res.Name) != "Probe/httpjson" || res.Iters != 100000 {
		t.Errorf("result name %q iters %d", res.Name, res.Iters)
	}
	want := map[string]float64{"allocs/req": 22.5, "B/req": 17131.65, "syscalls/req": 4.98, "cpu-us/req": 49.5, "req/s": 20000, "p99-us": 1100}
	for unit, v := range want {
		got, ok := res.Value(unit)
		if !ok || got != v {
			t.Errorf("%s = %v (%v), want %v", unit, got, ok, v)
		}
	}
	for _, unit := range []string{"allocs/req", "B/req"} {
		if a := units.GetAssumption(unit); a != benchmath.AssumeExact {
			t.Errorf("unit %s assumption = %v, want exact", unit, a)
		}
	}
	// The scheduler's syscalls move with timing: judged as timings are.
	for _, unit := range []string{"cpu-us/req", "syscalls/req"} {
		if a := units.GetAssumption(unit); a == benchmath.AssumeExact {
			t.Errorf("%s is marked exact; timings are not", unit)
		}
	}
	if cfg := res.GetConfig("commit"); cfg != "abc123" {
		t.Errorf("config commit = %q", cfg)
	}
}

func TestSummaryJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := JSON(&buf, sampleSummary()); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.golden.json", buf.Bytes())
	// The v1 keys that users' scripts read.
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "target", "commit", "go", "window", "attribution_window", "server_cores", "verdict", "per_request", "sources", "files"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary lacks %q", k)
		}
	}
	pr := m["per_request"].(map[string]any)
	for _, k := range []string{"allocs", "alloc_bytes", "copy_calls", "copied_bytes", "syscalls", "syscalls_by_name", "cpu_us", "offcpu_us"} {
		if _, ok := pr[k]; !ok {
			t.Errorf("per_request lacks %q", k)
		}
	}
	if pr["copy_calls"] != nil {
		t.Errorf("copy_calls = %v, want null when not measured", pr["copy_calls"])
	}
	w := m["window"].(map[string]any)
	for _, k := range []string{"seconds", "requests", "errors", "rps", "latency_us"} {
		if _, ok := w[k]; !ok {
			t.Errorf("window lacks %q", k)
		}
	}
}

// fullSummary is a run with every figure: the build check, copies, syscalls
// by name, the request split, its tail and the background.
func fullSummary() *schema.Summary {
	s := sampleSummary()
	s.Build = &schema.BuildCheck{Binary: "/cache/bin/1/httpjson", Mode: schema.ModeModule, Modules: 12,
		Added:   []schema.Module{{Path: "github.com/perfspy/perfspy/agent", Version: "v0.0.0-00010101000000-bbed8d0e0840", Replace: "/cache/agent (devel)"}},
		Changed: []schema.ModuleChange{}}
	s.Driver = &schema.DriverSummary{Name: "lean", CPUUS: 12.4, CoresUsed: 0.62, Source: "getrusage"}
	s.GOMAXPROCS, s.ServerCPUs, s.DriverCPUs = 1, []int{0}, []int{1}
	s.Sources["copies"], s.Sources["syscalls"], s.Sources["offcpu"], s.Sources["allocs"] = schema.SourceCopiesOverlay, syscalls.Source, schema.SourceOffCPU, schema.SourceAllocspy
	s.PerRequest.CopyCalls, s.PerRequest.CopiedBytes = f64(871.62), f64(33804.14)
	s.PerRequest.SyscallsByName = map[string]float64{"read": 2, "write": 1, "epoll_pwait": 0.78, "futex": 0.2}
	s.PerRequest.OffCPUUS = map[string]float64{"net": 0, "sync": 2.9, "syscall": 23.1, "sched": 3.6, "gc": 0.1, "sleep": 0, "other": 0, "net_idle": 0}
	s.PerRequest.RequestUS = map[string]float64{"cpu": 21.4, "net": 0, "sync": 2.9, "syscall": 23.1, "sched": 3.6, "gc": 0.1, "sleep": 0, "other": 0, "net_idle": 0, "total": 51.1}
	s.Checks = map[string]float64{"offcpu_requests": 98000, "request_us_remainder": 0, "driver_latency_mean_us": 390.2, "request_us_driver_gap": 339.1}
	parts := func(sync float64) map[string]float64 {
		return map[string]float64{"cpu": 21, "net": 0, "sync": sync, "syscall": 23, "sched": 3, "gc": 0, "sleep": 0, "other": 0, "net_idle": 0}
	}
	s.Tail = map[string]*schema.TailGroup{
		"p50": {Requests: 9800, TotalUS: 48, PartsUS: parts(1), Top: []schema.WaitRow{{Reason: "syscall", Wait: "syscall", Func: "syscall.write", US: 22.8}}},
		"p99": {Requests: 980, TotalUS: 410, PartsUS: parts(363), Top: []schema.WaitRow{{Reason: "sync", Wait: "chan receive", Func: "main.wait", WokenBy: "main.worker", US: 360}}},
	}
	s.BackgroundOffCPUUS = map[string]float64{"net": 1522.2, "net_idle": 6016427.7, "sync": 949.1, "syscall": 0, "sched": 12, "gc": 0, "sleep": 0, "other": 0}
	s.BackgroundTop = []schema.WaitRow{{Reason: "net_idle", Wait: "network", Func: "internal/poll.(*FD).Read", WokenBy: "runtime", US: 6006800.7}}
	s.Routes = []schema.RouteSummary{
		{Route: "GET /users/{id}", Requests: 30000, Allocs: 150000, AllocBytes: 4860000, CopiedBytes: 4020000, AllocsPerReq: f64(5), AllocBytesPerReq: f64(162), CopiedBytesPerReq: f64(134),
			Sites: []schema.RouteSite{{Func: "main.userAlloc", Allocs: 3, Bytes: 144}, {Func: "net/http.(*routingNode).matchPath", Allocs: 1, Bytes: 16}}, RequestUS: map[string]float64{"total": 31.2}, OffCPURequests: 58000},
		{Route: "GET /json", Requests: 20000, Allocs: 440000, AllocBytes: 17000000, CopiedBytes: 676000000, AllocsPerReq: f64(22), AllocBytesPerReq: f64(850), CopiedBytesPerReq: f64(33800),
			Sites: []schema.RouteSite{{Func: "main.buildDocument", Allocs: 2.5, Bytes: 20480}}},
	}
	s.RoutesBeforeRouting = &schema.RouteSummary{Route: "(before routing)", Requests: 50000, Allocs: 650000, AllocBytes: 70000000, AllocsPerReq: f64(13), AllocBytesPerReq: f64(1400), CopiedBytesPerReq: f64(62)}
	s.RoutesBackground = &schema.RouteSummary{Route: "background", Allocs: 2500, AllocBytes: 320000, AllocsPerSec: f64(500), AllocBytesPerSec: f64(64000), CopiedBytesPerSec: f64(0)}
	s.RoutesClosure = &schema.RoutesClosure{Allocs: 1242500, CopiedBytes: 680020000, RouteRequests: 50000, DriverRequests: 50000, Seconds: 5}
	s.RoutesUnfollowed = &schema.RouteSummary{Route: "(unfollowed)", Allocs: 1500, AllocBytes: 480000, AllocsPerSec: f64(300), AllocBytesPerSec: f64(96000), CopiedBytesPerSec: f64(0), ShareAllocs: f64(0.0012), ShareBytes: f64(0.01),
		Origins: []schema.RouteSummary{{Route: "GET /orphan", Requests: 500, Allocs: 1500, AllocBytes: 480000, AllocsPerReq: f64(3), AllocBytesPerReq: f64(960)}}}
	s.RoutesMixCheck = []schema.RouteMixCheck{{Route: "GET /orphan", Endpoint: "GET /orphan", MixAllocs: 1, AloneAllocs: 4, MixAllocBytes: 48, AloneAllocBytes: 1008, UnfollowedAllocs: 3, Note: "the mix left 3.00 allocations a request of its work unfollowed ((unfollowed) from GET /orphan): work it hands over that no channel or Cond carries"}}
	return s
}

func fullReport() *Run {
	s := fullSummary()
	return &Run{
		Summary:  s,
		Sites:    []Site{{Func: "net/textproto.readMIMEHeader", Values: []int64{250000, 2360000}}, {Func: "main.buildDocument", Values: []int64{50000, 409600}}},
		Requests: 50000, Totals: []int64{1125000, 856582500},
		CopySites:    []schema.CopySite{{User: "main.buildDocument", Direct: "runtime.growslice", Kind: "memmove", Calls: [4]int64{0, 100000, 0, 0}, Bytes: [4]int64{0, 51200000, 0, 0}}},
		CopyRequests: 50000, CopyTotal: [2]int64{43581000, 1690207000},
	}
}

// TestReportGolden: md from a fixed run, as a reviewer pastes it.
func TestReportGolden(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	fullReport().Markdown(&buf)
	golden(t, "report.golden.md", buf.Bytes())
}

// TestTerminalGolden: the lines a run prints at its end.
func TestTerminalGolden(t *testing.T) {
	t.Parallel()
	r := fullReport()
	r.Dir = "results/20261130T170000Z_abc123_httpjson"
	var buf bytes.Buffer
	r.Terminal(&buf)
	golden(t, "terminal.golden.txt", buf.Bytes())
}

// TestReportEscapes: a target folder named like HTML, and a site with a
// backtick and a pipe, stay text in md.
func TestReportEscapes(t *testing.T) {
	t.Parallel()
	r := fullReport()
	r.Summary.Target = "./<img src=x onerror=alert(1)>"
	r.Summary.Commit = "abc`def"
	if len(r.Sites) > 0 {
		r.Sites[0].Func = "main.f`|g\u202e"
	}
	var buf bytes.Buffer
	r.Markdown(&buf)
	md := buf.String()
	for _, raw := range []string{" <img", "/<img", "\u202e", "f`|g"} {
		if strings.Contains(md, raw) {
			t.Errorf("md holds %q raw", raw)
		}
	}
	for _, want := range []string{"commit ``abc`def``", "``main.f`\\|g\\u202e``"} {
		if !strings.Contains(md, want) {
			t.Errorf("md lacks %s", want)
		}
	}
	if !strings.Contains(md, `# perfspy: ./\<img src=x onerror=alert(1)\>`) {
		t.Errorf("heading: %q", strings.SplitN(md, "\n", 2)[0])
	}
}

// TestNoRequestLineSaysWhy: a target outside net/http gets a one-line
// reason instead of a missing request line.
func TestNoRequestLineSaysWhy(t *testing.T) {
	t.Parallel()
	r := fullReport()
	r.Summary.PerRequest.RequestUS = nil
	r.Summary.Sources["offcpu"] = schema.SourceNone + ": no request boundaries in the trace (they are marked in net/http's HTTP/1 and HTTP/2 servers only); background waits are in background_offcpu_us"
	r.Dir = "d"
	var buf bytes.Buffer
	r.Terminal(&buf)
	if !strings.Contains(buf.String(), "  request       n/a: no request boundaries in the trace (they are marked in net/http's") {
		t.Errorf("terminal:\n%s", buf.String())
	}
}

// TestNoZeroSiteRows: a site hit once in 10000 requests prints no
// "0.00 0 B" row; it is in the remainder, and the rows still add up.
func TestNoZeroSiteRows(t *testing.T) {
	t.Parallel()
	sites := []Site{{Func: "main.hot", Values: []int64{20000, 640000}}, {Func: "main.once", Values: []int64{1, 16}}}
	var md bytes.Buffer
	writeReport(&md, sampleSummary(), sites, 10000, []int64{20001, 640016})
	if strings.Contains(md.String(), "main.once") || !strings.Contains(md.String(), "| other 1 sites | 0.00 | 0 |") {
		t.Errorf("md:\n%s", md.String())
	}
	if got := visibleSites(sites, 10000, 5); len(got) != 1 {
		t.Errorf("visible %v", got)
	}
}

func f64(v float64) *float64 { return &v }

// TestHandOffLineAgrees: the terminal's "handed off" line says where the
// mix's split puts handed-off work as docs/probe.md does (the request's
// route when the runtime saw it handed), never "the background" alone.
func TestHandOffLineAgrees(t *testing.T) {
	share, bytes := 0.4, 4096.0
	line := handOffLine(schema.EndpointSummary{BackgroundShare: &share, BackgroundBytes: &bytes}, "GET /pollq")
	doc, err := os.ReadFile("../docs/probe.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, "on the request's route") || strings.Contains(line, "puts them in the background") {
		t.Errorf("handed off line: %s", line)
	}
	if !strings.Contains(string(doc), "over a channel or a `sync.Cond` is its request's route in the mix's split") {
		t.Error("docs/probe.md no longer says handed-off work is its request's route in the mix's split, which the handed off line prints")
	}
}
