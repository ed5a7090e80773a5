package probe

import (
	"bytes"
	"encoding/json"
	"flag"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"

	goldenfile "github.com/perfspy/perfspy/internal/golden"
	"github.com/perfspy/perfspy/load"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name; on a mismatch it writes got next
// to the golden file, so the two can be diffed.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got, *update)
}

func sampleSummary() *Summary {
	return &Summary{
		Schema: SummarySchema, Target: "./targets/httpjson", Commit: "abc123", Go: "go1.26.8",
		Window: WindowSummary{Seconds: 5, Requests: 100000, RPS: 20000,
			LatencyUS: map[string]int64{"p50": 380, "p99": 1100, "p999": 1600}},
		AttributionWindow: AttributionSummary{Seconds: 5, Requests: 50000, RPS: 10000},
		ServerCores:       0.98, CoresAvailable: 1, Verdict: VerdictServerBound,
		PerRequest: PerRequest{
			Allocs: f64(22.5), AllocBytes: f64(17131.65), Syscalls: f64(4.98), CPUUS: f64(49.5),
			SyscallsByName: map[string]float64{},
		},
		Sources: map[string]string{"allocs": SourceAllocsHeap, "cpu": "schedstat", "syscalls": SourceSyscallsIO, "copies": SourceNone, "offcpu": SourceNone},
		Files:   map[string]string{"allocs": "allocs.pb.gz"},
	}
}

func TestWriteBench(t *testing.T) {
	var buf bytes.Buffer
	cfg := map[string]string{"goos": "linux", "goarch": "amd64", "pkg": "./targets/httpjson", "commit": "abc123"}
	if err := writeBench(&buf, sampleSummary(), "httpjson", cfg); err != nil {
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
	if err := writeJSON(&buf, sampleSummary()); err != nil {
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

// Too few successes or failed requests in any window make the run not
// judged, each window named once.
func TestWindowReasons(t *testing.T) {
	ok := &windowResult{load: &load.Result{OK: 100}}
	bad := &windowResult{load: &load.Result{OK: 90, Errors: 2, Non2xx: 1, FirstErr: "connection reset"}}
	got := windowReasons([]namedWindow{{"timing window", ok}, {"attribution window", bad}, {"copy window", nil}, {"off-CPU window", bad}}, 50)
	want := []string{"3 failed requests in the attribution window (first: connection reset)"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	few := &windowResult{load: &load.Result{OK: 7}}
	got = windowReasons([]namedWindow{{"timing window", ok}, {"attribution window", ok}, {"copy window", ok}, {"off-CPU window", few}}, 50)
	want = []string{"too few successful requests (100 in the timing window, 7 in the off-CPU window; need 50)"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := windowReasons([]namedWindow{{"timing window", ok}, {"attribution window", ok}}, 100); got != nil {
		t.Errorf("enough successes, no failures: %q", got)
	}
}
