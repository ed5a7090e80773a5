package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/perf/benchfmt"

	"github.com/perfspy/perfspy/benchwin"
	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"

	"github.com/perfspy/perfspy/internal/withagent"
)

const benchFixture = "../benchwin/testdata/fix"

// TestBenchFixture measures benchwin's fixture, whose per-op costs are
// known, and holds every figure to them exactly: the set-up before
// ResetTimer and the work between StopTimer and StartTimer do not count,
// b.Loop's set-up does not count, a 4096-byte copy and one getppid per
// op do, and each sub-benchmark and each -count run has its own figures.
func TestBenchFixture(t *testing.T) {
	skipShort(t)
	s := benchFixtureRun(t)
	if s.GOARCH != runtime.GOARCH || s.Exec != "" {
		t.Errorf("summary: goarch %q exec %q, want %q and none", s.GOARCH, s.Exec, runtime.GOARCH)
	}
}

// TestBenchBudget: with extraBudget far below what a quarter of its ops
// take, BenchmarkSub/big (1 allocation of 1024 B an op, never linear: a
// global keeps the last op's) is measured warm over a divisor of N and
// traced over the ops that fit, and its figures are still exact: 1 and
// 1024 B an op, once warm and in the reported run.
func TestBenchBudget(t *testing.T) {
	skipShort(t)
	defer func(b time.Duration) { extraBudget = b }(extraBudget)
	extraBudget = 3 * time.Microsecond
	out := filepath.Join(t.TempDir(), "out")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"run", "-q", "-bench", "BenchmarkSub$/big", "-benchtime", "400x", "-out", out, benchFixture}, &o, &e)
	checkNoOrphans(t)
	if code != ExitOK {
		t.Fatalf("probe run -bench: exit %d\n%s%s", code, o.String(), e.String())
	}
	var s schema.BenchSummary
	if b, err := os.ReadFile(filepath.Join(out, "summary.json")); err != nil || json.Unmarshal(b, &s) != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(s.Benchmarks) != 1 {
		t.Fatalf("%d results, want 1", len(s.Benchmarks))
	}
	f := s.Benchmarks[0]
	ns := slowest(s, f.Name)
	if f.Steady == nil || f.Steady.Linear || f.Steady.Runs[1]-1 >= f.N/4 {
		t.Fatalf("%s: steady %+v, want warm runs of fewer than N/4 = %d ops", f.Name, f.Steady, f.N/4)
	}
	t.Logf("%s: %.0f ns/op; warm runs %v, traced %d ops", f.Name, ns, f.Steady.Runs, f.OffCPUN)
	checkWarmOps(t, f, ns)
	checkBenchOffCPU(t, out, f, false, ns)
	if f.OffCPUN >= f.N/4 {
		t.Errorf("%s: traced over %d ops, want fewer than %d", f.Name, f.OffCPUN, f.N/4)
	}
	for _, p := range []string{"allocs", "allocs_steady"} {
		objects, space := fixtureSum(t, out, f, p, "")
		if objects != float64(f.N) || space != 1024*float64(f.N) {
			t.Errorf("%s: %s: the fixture's sites %v allocs, %v B in %d ops; want 1 and 1024 B per op", f.Name, p, objects, space, f.N)
		}
	}
}

// TestBenchFixtureARM64 measures the same fixture built for linux/arm64
// and run under qemu-user (probe run -bench -exec): the same exact
// figures, from arm64's overlays (copyspy's arm64 recorder).
func TestBenchFixtureARM64(t *testing.T) {
	emulateARM64(t)
	s := benchFixtureRun(t, "-exec", "qemu-aarch64-static")
	if s.GOARCH != "arm64" || s.Exec != "qemu-aarch64-static" || !strings.Contains(s.Sources["ns"], "qemu-aarch64-static") {
		t.Errorf("summary: goarch %q exec %q ns source %q", s.GOARCH, s.Exec, s.Sources["ns"])
	}
}

// emulateARM64 skips a test that cross-measures arm64 where it cannot
// (not Linux, already arm64, no qemu-aarch64-static, -short), and sets
// GOARCH=arm64 for the builds of the rest of the test.
func emulateARM64(t *testing.T) {
	t.Helper()
	skipShort(t)
	if runtime.GOOS != "linux" || runtime.GOARCH == "arm64" {
		t.Skipf("skipped: cross-measures arm64 from another Linux architecture (here %s/%s)", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := exec.LookPath("qemu-aarch64-static"); err != nil {
		t.Skip("skipped: qemu-aarch64-static is not installed (Debian's qemu-user-static; test.sh installs it as root)")
	}
	t.Setenv("GOARCH", "arm64")
}

// benchFixtureRun runs probe run -bench on the fixture with extra flags
// and holds every result to the fixture's known costs.
func benchFixtureRun(t *testing.T, extra ...string) schema.BenchSummary {
	out := filepath.Join(t.TempDir(), "out")
	var o, e bytes.Buffer
	args := append([]string{"run", "-q", "-bench", ".", "-benchtime", "2000x", "-count", "2", "-out", out}, extra...)
	code := Main(context.Background(), append(args, benchFixture), &o, &e)
	checkNoOrphans(t)
	if code != ExitOK {
		t.Fatalf("probe run -bench: exit %d\n%s%s", code, o.String(), e.String())
	}
	var s schema.BenchSummary
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		allocs, bytes, copied float64
		syscall               string // one per op
	}{
		"BenchmarkSetup":     {1, 48, 0, ""},
		"BenchmarkLoop":      {2, 1072, -1, ""},
		"BenchmarkCopy":      {0, 0, 4096, ""},
		"BenchmarkSyscall":   {0, 0, -1, "getppid"},
		"BenchmarkSub/small": {1, 16, -1, ""},
		"BenchmarkSub/big":   {1, 1024, -1, ""},
		// Named from a map: another order in each run, matched by name.
		"BenchmarkMap/m32":  {1, 32, -1, ""},
		"BenchmarkMap/m64":  {1, 64, -1, ""},
		"BenchmarkMap/m128": {1, 128, -1, ""},
		"BenchmarkMap/m256": {1, 256, -1, ""},
		"BenchmarkMap/m512": {1, 512, -1, ""},
		"BenchmarkParallel": {-1, -1, -1, ""},
		"BenchmarkWait":     {-1, -1, -1, ""}, // its goroutine's first Sleep allocates a timer
		"BenchmarkLeak":     {-1, -1, -1, ""}, // keeps 1×256 B, starts a goroutine every 10th op
	}
	runs := map[string]int{}
	linear := 0
	for _, f := range s.Benchmarks {
		name := procsSuffix.ReplaceAllString(f.Name, "")
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected result %s", f.Name)
			continue
		}
		runs[name]++
		// The warm runs are skipped only where the reported run counted
		// N times its first op: never where a global keeps the last op's
		// value (Sub, Map: 1 object left by 1 op and by N), b.Loop (no
		// first run of 1 op), a goroutine left every 10th op (Leak) or a
		// timer made once (Wait). Copy and Syscall are linear but for the
		// runtime's chance allocations under runN (a new thread's).
		if f.Steady != nil && f.Steady.Linear {
			if name != "BenchmarkCopy" && name != "BenchmarkSyscall" && name != "BenchmarkSetup" && name != "BenchmarkParallel" {
				t.Errorf("%s: linear (no warm runs), want the warm runs", f.Name)
			}
			if f.Steady.OnceAllocs != 0 || f.Steady.OnceBytes != 0 || f.Steady.Runs != [2]int{1, f.N} {
				t.Errorf("%s: linear with %+v", f.Name, f.Steady)
			}
			if name == "BenchmarkCopy" || name == "BenchmarkSyscall" {
				linear++
			}
		}
		// 4 divides N: the warm runs measure a quarter of it (1 and
		// N/4+1 ops), times 4, and the figures below are still exact;
		// but an op whose quarter takes more than extraBudget (Wait's
		// sleeps last a millisecond) is measured over a divisor of N
		// that fits.
		if f.Steady != nil && !f.Steady.Linear {
			checkWarmOps(t, f, slowest(s, f.Name))
		}
		if f.N != 2000 {
			t.Errorf("%s: N %d, want 2000", f.Name, f.N)
		}
		// Once warm, the fixture's ops cost what they are known to (the
		// runtime's own allocations in a region move a count by a few in
		// a run, not one per op).
		if f.Steady == nil || w.allocs >= 0 && (math.Abs(f.PerOp.Allocs-w.allocs) > 0.005 || math.Abs(f.PerOp.AllocBytes-w.bytes) > 5) {
			t.Errorf("%s: once warm %v allocs/op %v B/op (%v), want %v and %v", f.Name, f.PerOp.Allocs, f.PerOp.AllocBytes, f.Steady, w.allocs, w.bytes)
		}
		// -benchtime 2000x: the counted run's b.N is go test's, and so
		// are its allocations (a runtime allocation of its own in one
		// run's timed region, a new thread's, may move its bytes by a
		// few per op: named).
		if w.allocs >= 0 && (f.GoTest == nil || f.GoTest.N != f.N || f.GoTest.Allocs != w.allocs || math.Abs(f.GoTest.Bytes-w.bytes) > 0.05*w.bytes+4 ||
			(f.CountsDiffer != "") != (f.GoTest.Bytes != math.Floor(f.Benchmem.Bytes))) {
			t.Errorf("%s: go test's line %+v, difference %q", f.Name, f.GoTest, f.CountsDiffer)
		}
		if w.allocs >= 0 {
			// The fixture's own sites are exact, in the reported run and
			// once warm alike.
			for _, p := range []string{"allocs", "allocs_steady"} {
				objects, space := fixtureSum(t, out, f, p, "")
				if objects != w.allocs*float64(f.N) || space != w.bytes*float64(f.N) {
					t.Errorf("%s: %s: the fixture's sites %v allocs, %v B in %d ops; want %v, %v per op", f.Name, p, objects, space, f.N, w.allocs, w.bytes)
				}
			}
		}
		if w.copied >= 0 {
			if _, moved := fixtureSum(t, out, f, "copies", "memmove"); moved != w.copied*float64(f.N) {
				t.Errorf("%s: the fixture's sites copied %v B in %d ops, want %v per op", f.Name, moved, f.N, w.copied)
			}
		}
		if f.PerOp.NS == nil || *f.PerOp.NS <= 0 {
			t.Errorf("%s: no ns/op from the plain binary", f.Name)
		}
		checkBenchSyscalls(t, f, w.syscall, s.Exec != "")
		checkBenchOffCPU(t, out, f, name == "BenchmarkWait", slowest(s, f.Name))
		checkBenchProfile(t, out, f)
		checkBenchRetained(t, out, f, name == "BenchmarkLeak")
	}
	if linear == 0 {
		t.Errorf("none of BenchmarkCopy's and BenchmarkSyscall's results took the linear shortcut")
	}
	for name := range want {
		if runs[name] != 2 {
			t.Errorf("%s: %d results, want 2 (-count 2)", name, runs[name])
		}
	}
	for _, b := range s.Blind {
		if strings.Contains(b, "the traced run") || strings.Contains(b, "the retained run") {
			t.Errorf("a result not matched across the runs: %s", b)
		}
	}
	checkBenchText(t, filepath.Join(out, "bench.txt"), len(s.Benchmarks))
	return s
}

// checkBenchSyscalls checks one syscall per op when the counter can run.
func checkBenchSyscalls(t *testing.T, f schema.BenchFigures, name string, emulated bool) {
	t.Helper()
	if emulated {
		if f.PerOp.Syscalls != nil {
			t.Errorf("%s: syscalls counted under an emulator", f.Name)
		}
		return
	}
	if err := capability.BPF("counting syscalls"); err != nil {
		if f.PerOp.Syscalls != nil {
			t.Errorf("%s: syscalls counted without the capability", f.Name)
		}
		t.Logf("syscall figures not checked: %v", err)
		return
	}
	if f.PerOp.Syscalls == nil {
		t.Errorf("%s: no syscall figures as root", f.Name)
		return
	}
	if name != "" && f.PerOp.SyscallsByName[name] != 1 {
		t.Errorf("%s: %s %v per op, want exactly 1 (%v)", f.Name, name, f.PerOp.SyscallsByName[name], f.PerOp.SyscallsByName)
	}
}

// fixtureSum sums the two values of the samples of a result's profile
// whose stack passes through the fixture's package (and whose label kind
// is kind, when set): the runtime's own work in the region (a thread the
// timer's stop of the world starts, the scavenger) is left out, and so is
// testing's own under the fixture (a sudog its timer's stop of the world
// takes when a GC holds the world: the first caller outside the runtime
// is testing's).
func fixtureSum(t *testing.T, out string, f schema.BenchFigures, name, kind string) (a, b float64) {
	t.Helper()
	p, err := readProfile(filepath.Join(out, f.Files[name]))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Sample {
		if kind != "" && s.Label["kind"][0] != kind {
			continue
		}
		in, caller := false, ""
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				in = in || strings.Contains(ln.Function.Name, "benchwin/testdata/fix.")
				if caller == "" && !strings.HasPrefix(ln.Function.Name, "runtime.") && !strings.HasPrefix(ln.Function.Name, "internal/runtime/") {
					caller = ln.Function.Name
				}
			}
		}
		if strings.HasPrefix(caller, "testing.") {
			in = false
		}
		// A copy the fixture made calls memmove itself. With whole
		// stacks, the runtime's own copies under the fixture (the memory
		// profiler's bucket for a sampled allocation, runtime.stkbucket)
		// are charged to its site too: not the fixture's copies.
		if name == "copies" && !strings.Contains(s.Label["via"][0], "benchwin/testdata/fix.") {
			in = false
		}
		if in {
			a += float64(s.Value[0])
			b += float64(s.Value[1])
		}
	}
	return a, b
}

// checkBenchOffCPU: the sleeping benchmark waits at least its 50 µs per
// op, and not ten times that; the copying one does not wait.
func checkBenchOffCPU(t *testing.T, out string, f schema.BenchFigures, sleeps bool, ns float64) {
	t.Helper()
	if f.PerOp.OffCPUNS == nil {
		t.Errorf("%s: no off-CPU figures", f.Name)
		return
	}
	// -benchtime Nx: the traced run takes a quarter of the ops, or for
	// an op whose quarter takes more than extraBudget at the timing
	// run's slowest time per op, what fits; its figures and profile are
	// per op of its own N.
	p, err := readProfile(filepath.Join(out, f.Files["offcpu"]))
	if err != nil {
		t.Fatal(err)
	}
	want, slack := f.N/4, 0
	if budget := float64(extraBudget.Nanoseconds()); float64(want)*ns > budget {
		// ns is the summary's, rounded: the cap may be one op apart.
		want, slack = max(1, int(budget/ns)), 1
	}
	if d := f.OffCPUN - want; d < -slack || d > slack || profkey.Requests(p) != int64(f.OffCPUN) {
		t.Errorf("%s: the traced run's N %d, its profile's %d; want %d (%.0f ns/op, at most %v of ops)", f.Name, f.OffCPUN, profkey.Requests(p), want, ns, extraBudget)
	}
	sleep := f.PerOp.OffCPUNS["sleep"]
	switch {
	case sleeps && (sleep < 50_000 || sleep > 5_000_000):
		// Timers here fire on the millisecond: 50 µs sleeps last about 1.1 ms.
		t.Errorf("%s: sleep %.0f ns/op, want 50 µs to 5 ms (%v)", f.Name, sleep, f.PerOp.OffCPUNS)
	case sleeps && f.PerOp.OffCPUNS["sync"] > sleep/10:
		t.Errorf("%s: sync %.0f ns/op beside sleep %.0f: a goroutine of the tracer's counted?", f.Name, f.PerOp.OffCPUNS["sync"], sleep)
	case !sleeps && strings.HasPrefix(f.Name, "BenchmarkCopy") && sleep > 1000:
		t.Errorf("%s: sleep %.0f ns/op in a benchmark that does not sleep", f.Name, sleep)
	}
}

// slowest is the timing run's slowest ns/op of the results named name
// (the traced run's cap is taken from it).
func slowest(s schema.BenchSummary, name string) float64 {
	ns := 0.0
	for _, f := range s.Benchmarks {
		if f.Name == name && f.PerOp.NS != nil {
			ns = max(ns, *f.PerOp.NS)
		}
	}
	return ns
}

// checkWarmOps: the warm runs were of 1 and M+1 ops, M being N/4 (4
// divides the fixture's N), or for an op whose N/4 take more than
// extraBudget a divisor of N below it (the recorder bounds M by the
// counted run's time per op, which is not the timing run's ns: a factor
// of 2 either way is allowed).
func checkWarmOps(t *testing.T, f schema.BenchFigures, ns float64) {
	t.Helper()
	m, budget := f.Steady.Runs[1]-1, float64(extraBudget.Nanoseconds())
	switch {
	case f.Steady.Runs[0] != 1 || m < 1 || m > f.N/4 || f.N%m != 0:
		t.Errorf("%s: warm runs of %v ops, want [1 M+1] for M = %d or a divisor of N below it", f.Name, f.Steady.Runs, f.N/4)
	case m == f.N/4 && float64(m)*ns > 2*budget:
		t.Errorf("%s: warm runs of %v ops at %.0f ns/op: more than twice %v", f.Name, f.Steady.Runs, ns, extraBudget)
	case m < f.N/4 && float64(f.N/4)*ns*2 < budget:
		t.Errorf("%s: warm runs of %v ops at %.0f ns/op: fewer than N/4 = %d, which take less than half of %v", f.Name, f.Steady.Runs, ns, f.N/4, extraBudget)
	}
}

// checkBenchProfile reads a result's allocation profile: it carries the op
// count, and its sites are the timed region's only (no set-up, nothing
// between StopTimer and StartTimer).
func checkBenchProfile(t *testing.T, out string, f schema.BenchFigures) {
	t.Helper()
	p, err := readProfile(filepath.Join(out, f.Files["allocs"]))
	if err != nil {
		t.Fatal(err)
	}
	if n := profkey.Requests(p); n != int64(f.N) {
		t.Errorf("%s: profile op count %d, want %d", f.Name, n, f.N)
	}
	var objects, space int64
	for _, s := range p.Sample {
		objects += s.Value[0]
		space += s.Value[1]
	}
	if uint64(objects) != f.Benchmem.AllocsTotal || uint64(space) != f.Benchmem.BytesTotal {
		t.Errorf("%s: profile sums %d objects %d B, -benchmem %d, %d B", f.Name, objects, space, f.Benchmem.AllocsTotal, f.Benchmem.BytesTotal)
	}
}

// checkBenchRetained holds what the ops left to the fixture's truth: the
// leaking benchmark keeps exactly one 256-byte object per op in keep
// (the goroutines' own records, made or reused by the runtime, aside) and
// leaves 0.1 goroutines per op running stuck, created by it; every other
// keeps at most the values its globals hold from the last op (2 objects
// in N ops) and leaves no goroutine.
func checkBenchRetained(t *testing.T, out string, f schema.BenchFigures, leaks bool) {
	t.Helper()
	if f.PerOp.RetainedObjects == nil || f.PerOp.GoroutinesLeft == nil || f.Files["retained"] == "" || f.Files["goroutines_left"] == "" {
		t.Errorf("%s: no retained figures (%+v)", f.Name, f.Files)
		return
	}
	p, err := readProfile(filepath.Join(out, f.Files["retained"]))
	if err != nil {
		t.Fatal(err)
	}
	n := profkey.Requests(p)
	keep, keepBytes := siteCount(p, "github.com/perfspy/perfspy/benchwin/testdata/fix.keep")
	if !leaks {
		if *f.PerOp.RetainedObjects*float64(n) > 2 || *f.PerOp.GoroutinesLeft != 0 || keep != 0 {
			t.Errorf("%s: left %v objects/op, %v goroutines/op in %d ops; want at most 2 objects in all, no goroutine", f.Name, *f.PerOp.RetainedObjects, *f.PerOp.GoroutinesLeft, n)
		}
		return
	}
	if n != 2000 || keep != n || keepBytes != 256*n {
		t.Errorf("%s: keep left %d objects, %d B in %d ops; want 1 and 256 B per op in 2000", f.Name, keep, keepBytes, n)
	}
	if *f.PerOp.GoroutinesLeft != 0.1 || len(f.GoroutinesLeft) != 1 || !strings.HasSuffix(f.GoroutinesLeft[0].Func, "fix.stuck") ||
		!strings.Contains(f.GoroutinesLeft[0].CreatedBy, "fix.BenchmarkLeak") || f.GoroutinesLeft[0].Count != 200 {
		t.Errorf("%s: %v goroutines left /op: %+v; want 0.1, 200 in fix.stuck created by fix.BenchmarkLeak", f.Name, *f.PerOp.GoroutinesLeft, f.GoroutinesLeft)
	}
	if len(f.RetainedSites) == 0 || !strings.HasSuffix(f.RetainedSites[0].Func, "fix.keep") || f.RetainedSites[0].Bytes != 256 {
		t.Errorf("%s: top retained sites %+v, want fix.keep first with 256 B/op", f.Name, f.RetainedSites)
	}
}

// checkBenchText reads bench.txt as benchstat does.
func checkBenchText(t *testing.T, path string, want int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := benchfmt.NewReader(f, path)
	results, exact := 0, 0
	for r.Scan() {
		switch x := r.Result().(type) {
		case *benchfmt.Result:
			results++
			if _, ok := x.Value("copied-B/op"); !ok {
				t.Errorf("%s: no copied-B/op", x.Name.Full())
			}
		case *benchfmt.UnitMetadata:
			exact++
		case *benchfmt.SyntaxError:
			t.Error(x)
		}
	}
	// The exact counts of the metric table written per op (allocs, B,
	// copied-B, cleared-B, retained-B, goroutines-left,
	// compiler-copied-B; ns/op and syscalls/op are timings): a Unit
	// line each, whether or not this run measured it.
	wantExact := 0
	for _, m := range metric.Table {
		if _, ok := m.Written("op"); ok && m.Bench && m.Judged.Counted() {
			wantExact++
		}
	}
	if results != want || exact != wantExact || wantExact < 6 {
		t.Errorf("bench.txt: %d results (want %d), %d unit lines (want %d)", results, want, exact, wantExact)
	}
}

// TestBenchMismatch: allocspy's count that differs from -benchmem's fails
// the run with the files written.
func TestBenchMismatch(t *testing.T) {
	rec := t.TempDir()
	ev := benchwin.Event{Name: "BenchmarkX-2", N: 10, Seq: 3, BenchmemAllocs: 11, BenchmemBytes: 480, Allocs: "1.allocs.json"}
	frames := `[{"pc":4096,"frames":[{"func":"x.BenchmarkX","file":"x_test.go","line":9}]}]`
	site := `{"dropped":0,"sites":[{"pcs":[4096],"words":[10,10,480,480,0,0,0,0,0],"delta":[10,10,480,480,0,0,0,0,0]}]}`
	records := fmt.Sprintf("frames %d\n%s\n1.allocs.json %d\n%s\n", len(frames), frames, len(site), site)
	if err := os.WriteFile(filepath.Join(rec, benchwin.ReportsFile), []byte(records), 0o644); err != nil {
		t.Fatal(err)
	}
	reports, err := benchwin.OpenReports(rec)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	bo := &benchOutput{cfg: BenchConfig{Target: "x", Bench: ".", Count: 1}, tgt: &withagent.Binary{GoVersion: "go1.26"}, commit: "c", dir: out,
		win: &benchWindow{dir: rec, events: []benchwin.Event{ev}, reports: reports}, files: map[string][]byte{}}
	if err := bo.write(); err != nil {
		t.Fatal(err)
	}
	if len(bo.mismatch) != 1 || !strings.Contains(bo.mismatch[0], "allocspy counted 10 allocations, 480 B; -benchmem counted 11, 480 B") {
		t.Errorf("mismatch %q", bo.mismatch)
	}
	if _, err := os.Stat(filepath.Join(out, "summary.json")); err != nil {
		t.Errorf("files not written: %v", err)
	}
}

// TestBenchErrors: bad input is refused with the flag or the package named.
func TestBenchErrors(t *testing.T) {
	skipShort(t)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-bench", "("}, ExitUsage, "-bench \"(\""},
		{[]string{"-bench", ".", "-benchtime", "0x"}, ExitUsage, "-benchtime \"0x\""},
		{[]string{"-bench", ".", "-count", "-1"}, ExitUsage, "-count -1"},
		{[]string{"-bench", ".", "../targets/floor"}, ExitFailed, "has no test files"},
		{[]string{"-bench", "NoSuchBenchmark", benchFixture}, ExitFailed, "no benchmark of"},
		{[]string{"-bench", "Skips$", benchFixture}, ExitFailed, "-bench \"Skips$\" matches 1 benchmark of " + benchFixture + " (BenchmarkSkips), and none printed a result: skipped or failed"},
		{[]string{"-bench", ".", "./no/such/dir"}, ExitFailed, "not a directory"},
	} {
		var o, e bytes.Buffer
		args := append([]string{"run", "-q", "-out", filepath.Join(t.TempDir(), "out")}, c.args...)
		code := Main(context.Background(), args, &o, &e)
		if code != c.code || !strings.Contains(e.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, e.String(), c.code, c.msg)
		}
	}
	checkNoOrphans(t)
}

var procsSuffix = regexp.MustCompile(`-[0-9]+$`)

// TestBenchCountedShort: without -benchtime, the timing run has testing's
// 1s and the counted run 100ms (its b.N smaller), and its counts still
// equal its own -benchmem exactly (b.Loop: the setup before it is outside
// the timed region).
func TestBenchCountedShort(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "out")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"run", "-q", "-bench", "Loop", "-offcpu=false", "-out", out, benchFixture}, &o, &e)
	checkNoOrphans(t)
	if code != ExitOK {
		t.Fatalf("probe run -bench: exit %d\n%s%s", code, o.String(), e.String())
	}
	n := func(file string) float64 {
		f, err := os.Open(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r := benchfmt.NewReader(f, file)
		for r.Scan() {
			if res, ok := r.Result().(*benchfmt.Result); ok {
				return float64(res.Iters)
			}
		}
		t.Fatalf("%s: no result", file)
		return 0
	}
	plain, counted := n("bench-plain.txt"), n("bench-window.txt")
	var s schema.BenchSummary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	t.Logf("b.N: timing run %.0f, counted run %.0f", plain, counted)
	if counted >= plain || !strings.Contains(s.Sources["benchmem"], "-benchtime 100ms") || s.Benchtime != "" {
		t.Errorf("b.N timing %.0f, counted %.0f; sources.benchmem %q; benchtime %q", plain, counted, s.Sources["benchmem"], s.Benchtime)
	}
	// Per op, the process's count equals -benchmem's; the runtime's own
	// allocations in the timed region (a GC worker's sudog, the
	// scavenger's timer heap) are in both, so the exact 2 per op is the
	// benchmark's own lines' count, and the rest has runtime leaves.
	for _, b := range s.Benchmarks {
		// Once warm, the benchmark's 2 per op, but for the runtime's own
		// allocations in a region (a few in a run).
		if b.Steady == nil || math.Abs(b.PerOp.Allocs-2) > 0.005 {
			t.Errorf("%s: %v allocs/op once warm (%v), want 2", b.Name, b.PerOp.Allocs, b.SteadyNote)
		}
		p, err := readProfile(filepath.Join(out, b.Files["allocs"]))
		if err != nil {
			t.Fatal(err)
		}
		own, _ := siteCount(p, "github.com/perfspy/perfspy/benchwin/testdata/fix.BenchmarkLoop")
		var rest int64
		for _, smp := range p.Sample {
			if leaf := leafName(smp); !strings.HasSuffix(leaf, ".BenchmarkLoop") {
				// The window's edge reads the memory statistics: the
				// runtime may allocate in it (a sudog for the stop of
				// the world), charged to the window's function, and
				// counted by -benchmem the same.
				edge := leaf == "testing.perfspyReadMemStats" && len(smp.Label["via"]) == 1 && strings.HasPrefix(smp.Label["via"][0], "runtime.")
				if !strings.HasPrefix(leaf, "runtime.") && !edge {
					t.Errorf("%s: %d allocations at %s, outside the benchmark and the runtime", b.Name, smp.Value[0], leaf)
				}
				rest += smp.Value[0]
			}
		}
		t.Logf("%s: N %d, BenchmarkLoop's lines %d, the runtime's %d", b.Name, b.N, own, rest)
		if own != 2*int64(b.N) {
			t.Errorf("%s: BenchmarkLoop's lines allocated %d for N %d, want 2 per op", b.Name, own, b.N)
		}
	}
}

// TestBenchCountsDiffer: probe's counted run is shorter than go test's
// (-benchtime 100ms against 1s), so an op whose allocations depend on b.N
// counts differently from go test -benchmem's line: the result names the
// difference, with both b.N; a steady op's counts equal go test's.
func TestBenchCountsDiffer(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "out")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"run", "-q", "-bench", ".", "-offcpu=false", "-retained=false", "-copies", "off", "-out", out, "./testdata/amortized"}, &o, &e)
	checkNoOrphans(t)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, o.String(), e.String())
	}
	var s schema.BenchSummary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range s.Benchmarks {
		g := f.GoTest
		if g == nil {
			t.Errorf("%s: no go test line beside it", f.Name)
			continue
		}
		t.Logf("%s: counted N=%d %.4f allocs/op; go test N=%d %v allocs/op; %q", f.Name, f.N, f.PerOp.Allocs, g.N, g.Allocs, f.CountsDiffer)
		st := f.Steady
		if st == nil {
			t.Errorf("%s: no steady state (%s)", f.Name, f.SteadyNote)
			continue
		}
		t.Logf("%s: once warm %v allocs/op %v B/op; paid once %d allocs %d B", f.Name, f.PerOp.Allocs, f.PerOp.AllocBytes, st.OnceAllocs, st.OnceBytes)
		// The runtime's own allocations in a timed region (a thread's)
		// move a count by a few in a run: not by one per op.
		near := func(got, want, slack float64) bool { return math.Abs(got-want) <= slack }
		switch procsSuffix.ReplaceAllString(f.Name, "") {
		case "BenchmarkAmortized":
			seen++
			want := float64(100000 / g.N)
			if g.N <= f.N || g.Allocs != want || !strings.Contains(f.CountsDiffer, fmt.Sprintf("at b.N=%d", g.N)) || !strings.Contains(f.CountsDiffer, fmt.Sprintf("at b.N=%d", f.N)) ||
				!strings.Contains(f.CountsDiffer, "paid once") {
				t.Errorf("%s: go test N=%d %v allocs/op (want %v), counted N=%d: difference %q", f.Name, g.N, g.Allocs, want, f.N, f.CountsDiffer)
			}
			// Each run's first op pays 100,000 allocations: once per run,
			// none per op. (The GC those 800 kB start allocates in the
			// warm runs too: a few kB, 5.5 kB seen in CI.)
			if !near(f.PerOp.Allocs, 0, 0.01) || !near(float64(st.OnceAllocs), 100000, 20) || !near(float64(st.OnceBytes), 800000, 8192) {
				t.Errorf("%s: once warm %v allocs/op; paid once %d allocs %d B, want 0 and 100,000, 800,000 B", f.Name, f.PerOp.Allocs, st.OnceAllocs, st.OnceBytes)
			}
		case "BenchmarkSteady":
			seen++
			// A run may pay the runtime's own once (a new thread's 5.5 kB,
			// seen under Go 1.27): go test's line then differs by a byte,
			// and says so by what was paid once, at the runtime's sites.
			ownOnce := slices.ContainsFunc(st.OnceSites, func(o schema.OnceSite) bool { return strings.Contains(o.Func, "amortized.") })
			if f.CountsDiffer != "" && !strings.Contains(f.CountsDiffer, "paid once") || ownOnce || g.Allocs != 1 || g.Bytes != 48 || !near(f.PerOp.Allocs, 1, 0.001) || !near(f.PerOp.AllocBytes, 48, 0.05) || !near(float64(st.OnceAllocs), 0, 20) {
				t.Errorf("%s: %q; go test %v allocs/op %v B/op, once warm %v %v, paid once %d", f.Name, f.CountsDiffer, g.Allocs, g.Bytes, f.PerOp.Allocs, f.PerOp.AllocBytes, st.OnceAllocs)
			}
		case "BenchmarkCallers", "BenchmarkCallersLoop":
			seen++
			// An op whose cost depends on its callers (a buffer for each
			// frame whose file is on disk): the warm runs go through
			// the reported run's frames, so once warm it costs what go
			// test counts, and nothing of it is paid once. Run from
			// another function (a file not on disk), they read one
			// allocation an op fewer, and b.N of them "paid once".
			if g.Allocs < 5 || !near(f.PerOp.Allocs, g.Allocs, 0.01) || !near(f.PerOp.AllocBytes, g.Bytes, 1) || st.OnceAllocs > 20 || st.OnceAllocs < 0 || st.OnceBytes < 0 {
				t.Errorf("%s: once warm %v allocs/op %v B/op, paid once %d allocs %d B at %+v; go test %v allocs/op %v B/op", f.Name, f.PerOp.Allocs, f.PerOp.AllocBytes, st.OnceAllocs, st.OnceBytes, st.OnceSites, g.Allocs, g.Bytes)
			}
		case "BenchmarkCache":
			seen++
			// b.Loop: the process's first op, and its 1 MiB, are in the
			// run reported; go test spreads the MiB over its b.N. (The
			// runtime's own allocations in a run, a new thread's, move
			// the total by a few kB: the site holds the MiB.)
			if !near(f.PerOp.Allocs, 1, 0.001) || !near(f.PerOp.AllocBytes, 48, 0.05) || !near(float64(st.OnceBytes), 1<<20, 16384) ||
				len(st.OnceSites) == 0 || st.OnceSites[0].Func != "github.com/perfspy/perfspy/probe/testdata/amortized.BenchmarkCache" || !near(float64(st.OnceSites[0].Bytes), 1<<20, 2048) {
				t.Errorf("%s: once warm %v allocs/op %v B/op, paid once %d allocs %d B at %+v; want 1, 48 and 1 MiB at BenchmarkCache", f.Name, f.PerOp.Allocs, f.PerOp.AllocBytes, st.OnceAllocs, st.OnceBytes, st.OnceSites)
			}
			if want := math.Floor((1<<20 + 48*float64(g.N)) / float64(g.N)); g.Bytes < want-64 || g.Bytes > want+64 {
				t.Errorf("%s: go test %v B/op at b.N=%d, want about %v: the MiB spread over b.N", f.Name, g.Bytes, g.N, want)
			}
		}
	}
	if seen != 5 {
		t.Errorf("%d of the 5 benchmarks", seen)
	}
	if r := readFile(t, filepath.Join(out, "report.md")); !strings.Contains(r, "Paid once in the reported run") {
		t.Errorf("report.md does not list what was paid once")
	}
	if r := readFile(t, filepath.Join(out, "report.md")); !strings.Contains(r, "Not go test's count") {
		t.Errorf("report.md does not name the difference")
	}
}

// TestBenchCut: a traced run that would take a minute is cut at its
// bound, or interrupted; either way summary.json is written with every
// figure of the runs that finished, the off-CPU figures of the results
// the run finished, and the cut named.
func TestBenchCut(t *testing.T) {
	skipShort(t)
	for _, interrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("interrupt=%v", interrupt), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if interrupt {
				extraRunFloor = time.Minute
			} else {
				extraRunFloor = 3 * time.Second
			}
			defer func() { extraRunFloor = 30 * time.Second }()
			out := filepath.Join(t.TempDir(), "out")
			// Interrupt 3 s into the traced run: the quick benchmark has
			// reported, the heavy one waits.
			logw := writerFunc(func(p []byte) {
				if interrupt && bytes.Contains(p, []byte("tracing the benchmarks")) {
					time.AfterFunc(3*time.Second, cancel)
				}
			})
			var o, e bytes.Buffer
			start := time.Now()
			code := mainBenchArgs(ctx, t, logw, &o, &e, "-bench", ".", "-benchtime", "100x", "-retained=false", "-copies", "off", "-out", out, "./testdata/cutrun")
			checkNoOrphans(t)
			t.Logf("exit %d in %v", code, time.Since(start).Round(time.Millisecond))
			if want := map[bool]int{false: ExitOK, true: ExitFailed}[interrupt]; code != want {
				t.Fatalf("exit %d, want %d\n%s%s", code, want, o.String(), e.String())
			}
			var s schema.BenchSummary
			if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
				t.Fatal(err)
			}
			want := map[bool]string{false: "cut at its bound", true: "interrupted"}[interrupt]
			if len(s.Cut) != 1 || !strings.Contains(s.Cut[0], "the traced run: "+want) || !strings.Contains(o.String(), want) {
				t.Errorf("cut %q, want the traced run %s; terminal:\n%s", s.Cut, want, o.String())
			}
			for _, f := range s.Benchmarks {
				quick := strings.HasPrefix(f.Name, "BenchmarkQuick")
				if math.Floor(f.PerOp.Allocs) != 1 || (f.PerOp.OffCPUNS != nil) != quick {
					t.Errorf("%s: %v allocs/op, off-CPU %v", f.Name, f.PerOp.Allocs, f.PerOp.OffCPUNS)
				}
			}
			if len(s.Benchmarks) != 2 || !slices.ContainsFunc(s.Blind, func(b string) bool {
				return strings.Contains(b, "BenchmarkHeavyTraced") && strings.Contains(b, "traced run")
			}) {
				t.Errorf("%d results; blind spots %q", len(s.Benchmarks), s.Blind)
			}
		})
	}
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// mainBenchArgs runs probe run ARGS with ctx, its log to logw.
func mainBenchArgs(ctx context.Context, t *testing.T, logw io.Writer, stdout, stderr io.Writer, args ...string) int {
	t.Helper()
	cfg, opt, code, ok := parseRunFlags("probe run", args, stderr, nil)
	if !ok {
		return code
	}
	return mainBench(ctx, cfg, opt.bench, logw, stdout, stderr)
}

// TestBenchTimeout: a benchmark that never returns is stopped at
// -bench-timeout, named in the error, and leaves no process behind
// (testing's own -test.timeout does not cover benchmarks).
func TestBenchTimeout(t *testing.T) {
	skipShort(t)
	var o, e bytes.Buffer
	start := time.Now()
	out := filepath.Join(t.TempDir(), "out")
	code := mainBenchArgs(context.Background(), t, io.Discard, &o, &e, "-bench", ".", "-bench-timeout", "5s", "-retained=false", "-copies", "off", "-offcpu=false", "-out", out, "./testdata/benchhang")
	t.Logf("%q", readFile(t, filepath.Join(out, "bench-plain.txt")))
	checkNoOrphans(t)
	t.Logf("exit %d in %v: %s", code, time.Since(start).Round(time.Millisecond), e.String())
	if code != ExitFailed || !strings.Contains(e.String(), "BenchmarkHangs ran past 5s (-bench-timeout)") {
		t.Errorf("exit %d, stderr %q; want BenchmarkHangs named", code, e.String())
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("%v: the bound did not hold", d)
	}
}
