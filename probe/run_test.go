package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/storetest"
	"github.com/perfspy/perfspy/internal/testtarget"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/syscalls"

	"github.com/perfspy/perfspy/internal/capability"

	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/internal/stacks"
)

// These tests build real targets and measure them. They share one cache
// folder, so every process they start can be found afterwards: none may
// survive a run.

var testCacheDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "perfspy-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testCacheDir = d
	os.Setenv("PERFSPY_CACHE", d)
	code := m.Run()
	storetest.StopShared()
	os.RemoveAll(d)
	os.Exit(code)
}

// orphans lists the processes whose executable lives in the test cache.
func orphans() []string {
	var out []string
	for _, pid := range proc.AllPIDs() {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && strings.HasPrefix(exe, testCacheDir) {
			out = append(out, fmt.Sprintf("pid %d (%s)", pid, exe))
		}
	}
	return out
}

func checkNoOrphans(t *testing.T) {
	t.Helper()
	if o := orphans(); len(o) > 0 {
		t.Errorf("processes outlived probe: %v", o)
	}
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs targets; skipped with -short")
	}
}

// probeRun runs 'probe run' in process with short windows.
func probeRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	full := append([]string{"run", "-q", "-warmup", "300ms", "-duration", "1s", "-out", filepath.Join(t.TempDir(), "out")}, args...)
	code = Main(context.Background(), full, &o, &e)
	checkNoOrphans(t)
	return code, o.String(), e.String()
}

// measured is one finished run's files.
type measured struct {
	dir     string
	summary map[string]any
	allocs  *profile.Profile
}

func runTarget(t *testing.T, path string, extra ...string) *measured {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	args := append([]string{"-out", out, "-path", path}, extra...)
	args = append(args, "./testdata/probetarget")
	code, stdout, stderr := probeRun(t, args...)
	// Counts do not depend on speed: a run that is not judged (a busy CI
	// machine) still has exact counts.
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("probe run %s: exit %d\n%s%s", path, code, stdout, stderr)
	}
	m := &measured{dir: out}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m.summary); err != nil {
		t.Fatal(err)
	}
	if m.allocs, err = readProfile(filepath.Join(out, "allocs.pb.gz")); err != nil {
		t.Fatal(err)
	}
	if err := m.allocs.CheckValid(); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *measured) num(t *testing.T, path ...string) float64 {
	t.Helper()
	var v any = m.summary
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("summary: %v is not an object", path)
		}
		v = mm[k]
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("summary %v = %v, not a number", path, v)
	}
	return f
}

// siteCount sums alloc_objects and alloc_space of samples whose leaf is fn.
func siteCount(p *profile.Profile, fn string) (objs, bytes int64) {
	for _, s := range p.Sample {
		if leafName(s) == fn {
			objs += s.Value[0]
			bytes += s.Value[1]
		}
	}
	return
}

func requestsComment(t *testing.T, p *profile.Profile) int64 {
	t.Helper()
	for _, c := range p.Comments {
		if v, ok := strings.CutPrefix(c, profkey.RequestsComment); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("profile has no %s comment: %q", profkey.RequestsComment, p.Comments)
	return 0
}

// TestGroundTruth measures endpoints of probetarget whose costs are known.
func TestGroundTruth(t *testing.T) {
	skipShort(t)
	none := runTarget(t, "/none")
	alloc := runTarget(t, "/alloc")

	t.Run("allocations", func(t *testing.T) {
		n := requestsComment(t, alloc.allocs)
		if float64(n) != alloc.num(t, "attribution_window", "requests") {
			t.Fatalf("profile requests %d != summary attribution_window.requests", n)
		}
		objs, by := siteCount(alloc.allocs, "main.allocK7")
		perReq := float64(objs) / float64(n)
		t.Logf("main.allocK7: %d allocations, %d bytes over %d requests: %.4f allocs/req, %.2f B/req", objs, by, n, perReq, float64(by)/float64(n))
		if math.Abs(perReq-7) > 7*0.005 {
			t.Errorf("main.allocK7: %.4f allocs/req, want 7 (±0.5%%)", perReq)
		}
		if b := float64(by) / float64(n); math.Abs(b-7*64) > 7*64*0.005 {
			t.Errorf("main.allocK7: %.1f B/req, want 448", b)
		}
		if o, _ := siteCount(none.allocs, "main.allocK7"); o != 0 {
			t.Errorf("/none: main.allocK7 has %d allocations, want 0", o)
		}
		// The difference of the totals is the handler's own allocations.
		d := alloc.num(t, "per_request", "allocs") - none.num(t, "per_request", "allocs")
		if math.Abs(d-7) > 0.1 {
			t.Errorf("allocs/req /alloc - /none = %.3f, want 7", d)
		}
	})

	t.Run("agent excluded", func(t *testing.T) {
		for _, s := range alloc.allocs.Sample {
			if throughInstruments(s) {
				t.Fatalf("sample through the agent: %s", leafName(s))
			}
		}
		// runtime/metrics counts heap blocks, the agent's included: it must
		// agree with allocspy's blocks to well within 1%.
		prof := alloc.num(t, "per_request", "alloc_blocks")
		met := alloc.num(t, "checks", "metrics_allocs_per_req_attribution_window")
		t.Logf("allocs/req: profile %.4f, runtime/metrics %.4f", prof, met)
		if math.Abs(prof-met) > 0.01*met {
			t.Errorf("profile %.4f allocs/req vs runtime/metrics %.4f", prof, met)
		}
	})

	t.Run("syscalls", func(t *testing.T) {
		write := runTarget(t, "/write")
		d := write.num(t, "per_request", "syscalls") - none.num(t, "per_request", "syscalls")
		t.Logf("syscalls/req: /write %.4f, /none %.4f, delta %.4f", write.num(t, "per_request", "syscalls"), none.num(t, "per_request", "syscalls"), d)
		if write.summary["sources"].(map[string]any)["syscalls"] == "bpf-tracepoint" {
			// Every syscall is counted: compare the writes alone, exactly.
			dw := write.num(t, "per_request", "syscalls_by_name", "write") - none.num(t, "per_request", "syscalls_by_name", "write")
			t.Logf("write/req: delta %.6f", dw)
			if math.Abs(dw-1) > 0.001 {
				t.Errorf("write/req /write - /none = %.6f, want 1 (one write(2) per request)", dw)
			}
		} else if math.Abs(d-1) > 0.1 {
			t.Errorf("syscalls/req /write - /none = %.3f, want 1 (one write(2) per request)", d)
		}
	})

	t.Run("goroutines created", func(t *testing.T) {
		// /child starts one goroutine a request, /none none; net/http's
		// own (a connection's, its background read's) are in both.
		child := runTarget(t, "/child")
		c, n := child.num(t, "per_request", "goroutines_created"), none.num(t, "per_request", "goroutines_created")
		t.Logf("goroutines created/req: /child %.4f, /none %.4f", c, n)
		if math.Abs(c-n-1) > 0.01 {
			t.Errorf("goroutines-created/req /child - /none = %.4f, want 1", c-n)
		}
		if b := readFile(t, filepath.Join(child.dir, "bench.txt")); !strings.Contains(b, "goroutines-created/req") {
			t.Errorf("bench.txt has no goroutines-created/req:\n%s", b)
		}
	})

	t.Run("cpu", func(t *testing.T) {
		spin := runTarget(t, "/spin?us=400")
		d := spin.num(t, "per_request", "cpu_us") - none.num(t, "per_request", "cpu_us")
		t.Logf("cpu µs/req: /spin?us=400 %.1f, /none %.1f, delta %.1f", spin.num(t, "per_request", "cpu_us"), none.num(t, "per_request", "cpu_us"), d)
		if d < 400*0.8 || d > 400*1.25 {
			t.Errorf("cpu µs/req /spin?us=400 - /none = %.1f, want 400 (-20%%, +25%%)", d)
		}
	})

	t.Run("bench.txt reads in benchstat", func(t *testing.T) {
		out, err := exec.Command("go", "tool", "benchstat", filepath.Join(alloc.dir, "bench.txt")).CombinedOutput()
		if err != nil {
			t.Fatalf("benchstat: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "allocs/req") {
			t.Errorf("benchstat output lacks allocs/req:\n%s", out)
		}
	})

	t.Run("go tool pprof opens allocs.pb.gz", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-sample_index=alloc_objects", filepath.Join(alloc.dir, "allocs.pb.gz")).CombinedOutput()
		if err != nil {
			t.Fatalf("pprof: %v\n%s", err, out)
		}
		objs, _ := siteCount(alloc.allocs, "main.allocK7")
		re := regexp.MustCompile(`(?m)^\s*(\d+)\s.*main\.allocK7$`)
		mm := re.FindStringSubmatch(string(out))
		if mm == nil || mm[1] != strconv.FormatInt(objs, 10) {
			t.Errorf("pprof -top shows %v for main.allocK7, want flat %d:\n%s", mm, objs, out)
		}
	})
}

func TestNotJudged(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := probeRun(t, "-out", out, "-path", "/sleep?ms=5", "./testdata/probetarget")
	if code != ExitNotJudged {
		t.Fatalf("exit %d, want %d\n%s%s", code, ExitNotJudged, stdout, stderr)
	}
	for _, f := range []string{"summary.json", "bench.txt", "allocs.pb.gz", "cpu.pb.gz", "report.md", "meta"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("not-judged run did not write %s: %v", f, err)
		}
	}
	var s schema.Summary
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Verdict != VerdictNotJudged || !strings.Contains(strings.Join(s.Reasons, " "), "cores") {
		t.Errorf("verdict %q reasons %q", s.Verdict, s.Reasons)
	}
	if p50 := s.Window.LatencyUS["p50"]; p50 < 5000 || p50 > 100000 {
		t.Errorf("p50 = %d µs for a 5 ms sleep", p50)
	}
	// The sleep leaves the server's cores idle: its timings are not
	// judged, its counts are, and the exit's line says so once.
	if s.Judged == nil || !s.Judged.Counts || s.Judged.Timing {
		t.Errorf("judged %+v: want the counts judged, the timings not", s.Judged)
	}
	if strings.Count(stderr, "the target used") != 0 || !strings.Contains(stderr, "-judge counts exits 0") {
		t.Errorf("stderr repeats the reason or does not name -judge counts:\n%s", stderr)
	}
	code, stdout, stderr = probeRun(t, "-judge", "counts", "-path", "/sleep?ms=5", "./testdata/probetarget")
	if code != ExitOK || !strings.Contains(stdout, "the counts are judged, the timings are not") || !strings.Contains(stdout, "timing not judged: the target used") {
		t.Errorf("-judge counts: exit %d, want %d with the timings said not judged\n%s%s", code, ExitOK, stdout, stderr)
	}
}

func TestOtherModule(t *testing.T) {
	skipShort(t)
	dir := "./testdata/othermod/cmd/server"
	before, _ := os.ReadDir(dir)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := probeRun(t, "-out", out, "-path", "/orders", dir)
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	p, err := readProfile(filepath.Join(out, "allocs.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	objs, _ := siteCount(p, "main.orders")
	if n := requestsComment(t, p); math.Abs(float64(objs)/float64(n)-3) > 3*0.005 {
		t.Errorf("main.orders: %d allocations for %d requests, want 3 per request", objs, n)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Errorf("probe wrote into the target's directory: %d entries before, %d after", len(before), len(after))
	}
	if _, err := os.Stat("./testdata/othermod/go.sum"); err == nil {
		t.Error("probe created go.sum in the target module")
	}
}

func TestBadInput(t *testing.T) {
	skipShort(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	existing := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"does not build", []string{"./testdata/nobuild"}, ExitFailed, []string{"building ./testdata/nobuild", "undefinedFunction"}},
		{"no such target", []string{"./testdata/missing"}, ExitFailed, []string{"./testdata/missing", "not a directory"}},
		{"exits at start", []string{"-args", "-mode exit", "./testdata/probetarget"}, ExitFailed, []string{"exited before it listened", "exiting at start as asked"}},
		{"never listens", []string{"-args", "-mode nolisten", "-ready-timeout", "1s", "./testdata/probetarget"}, ExitFailed, []string{"never listened", "-ready-timeout"}},
		{"crashes mid-window", []string{"-args", "-mode crash -crash-after 3000", "-warmup", "0s", "-duration", "20s", "./testdata/probetarget"}, ExitFailed, []string{"exited during the window", "crashing as asked"}},
		{"panics mid-window", []string{"-args", "-mode panic -crash-after 3000", "-warmup", "0s", "-duration", "20s", "./testdata/probetarget"}, ExitFailed, []string{"its last output:\n  | panic: probetarget: panicking as asked", "goroutine", "main.panicDeep"}},
		{"floods its output", []string{"-args", "-mode flood", "./testdata/probetarget"}, ExitFailed, []string{"its last output:\n  | xxx", "... (", "bytes more)"}},
		{"wrong -addr", []string{"-addr", "127.0.0.1:9", "-ready-timeout", "2s", "./testdata/probetarget"}, ExitFailed, []string{"never listened on 127.0.0.1:9 (it listens on 127.0.0.1:", "pass that to -addr"}},
		{"port held by another process", []string{"-addr", held.Addr().String(), "./testdata/probetarget"}, ExitFailed, []string{"held by another process", fmt.Sprintf("pid %d", os.Getpid())}},
		{"existing out", []string{"-out", existing, "./testdata/probetarget"}, ExitUsage, []string{existing, "already exists"}}, // before the build
		{"zero duration", []string{"-duration", "0", "./testdata/probetarget"}, ExitUsage, []string{"-duration"}},
		{"bad cpus", []string{"-cpus", "0:0", "./testdata/probetarget"}, ExitUsage, []string{"-cpus", "both"}},
		{"bad args", []string{"-args", "'open", "./testdata/probetarget"}, ExitUsage, []string{"-args", "quote"}},
		{"unknown flag", []string{"-bogus", "./testdata/probetarget"}, ExitUsage, []string{"-bogus"}},
		{"two targets", []string{"./a", "./b"}, ExitUsage, []string{"one target"}},
		{"bad env", []string{"-env", "NOVALUE", "./testdata/probetarget"}, ExitUsage, []string{"-env", "KEY=VALUE"}},
		{"reserved label", []string{"-push", "http://127.0.0.1:1", "-label", "service_name=x", "./testdata/probetarget"}, ExitUsage, []string{"-label", "service_name", "the store's own"}},
		{"bad size", []string{"-size", "-5", "./targets/quicecho"}, ExitUsage, []string{"-size -5"}},
		{"bad pkt", []string{"-pkt", "8", "./targets/udpfloor"}, ExitUsage, []string{"-pkt 8"}},
		{"bad proto", []string{"-proto", "smtp", "./testdata/probetarget"}, ExitUsage, []string{"-proto", "quic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := probeRun(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "panic") && tc.name != "panics mid-window" {
				t.Errorf("panic:\n%s", stderr)
			}
			if len(stderr) > 64<<10 {
				t.Errorf("stderr of %d bytes", len(stderr))
			}
		})
	}
	t.Run("unknown command", func(t *testing.T) {
		var o, e bytes.Buffer
		if code := Main(context.Background(), []string{"bogus"}, &o, &e); code != ExitUsage || !strings.Contains(e.String(), `"bogus"`) {
			t.Errorf("exit %d, stderr %q", code, e.String())
		}
	})
}

// TestInterrupt sends Ctrl-C to a probe process in the middle of a window:
// it must stop the target and exit.
func TestInterrupt(t *testing.T) {
	skipShort(t)
	bin := buildProbe(t)
	p := startProbe(t, bin, "snapshot 1", nil, "run", "-warmup", "0s", "-duration", "30s", "-out", filepath.Join(t.TempDir(), "out"), "./testdata/probetarget")
	if len(orphans()) == 0 {
		t.Fatalf("no target running in the window; probe said:\n%s", p.said())
	}
	time.Sleep(300 * time.Millisecond)
	err := p.stop(t, syscall.SIGINT, 20*time.Second)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitFailed {
		t.Errorf("probe exit: %v, want exit %d", err, ExitFailed)
	}
	if !strings.Contains(p.said(), "interrupted") {
		t.Errorf("probe did not say it was interrupted:\n%s", p.said())
	}
	checkNoOrphans(t)
}

// TestDefaultTarget runs 'probe run' with no target, from another directory
// than the module root: it measures ./targets/httpjson's GET /json.
func TestDefaultTarget(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := probeRun(t, "-out", out)
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var s schema.Summary
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Target != DefaultTarget || s.Schema != SummarySchema {
		t.Errorf("target %q schema %q", s.Target, s.Schema)
	}
	// The README names every file the default run writes.
	readme := readFile(t, "../README.md")
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if !strings.Contains(readme, "`"+e.Name()+"`") {
			t.Errorf("README.md does not name %s, which the default run writes", e.Name())
		}
	}
	// The load driver's own cost is in every summary.
	if d := s.Driver; d == nil || d.Name != "lean" || d.CPUUS <= 0 || d.CoresUsed <= 0 || d.CoresUsed > 2 {
		t.Errorf("driver %+v", d)
	}
	p, err := readProfile(filepath.Join(out, "allocs.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	n := requestsComment(t, p)
	// buildDocument makes one slice of 50 items per request.
	if objs, _ := siteCount(p, "main.buildDocument"); objs != n {
		t.Errorf("main.buildDocument: %d allocations for %d requests, want one each", objs, n)
	}
	// The CPU profile's coverage is its own total over the measured CPU;
	// a busy machine can leave it without samples (then it has no graph,
	// and the run says so).
	cpu, err := readProfile(filepath.Join(out, "cpu.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var sampled int64
	for _, smp := range cpu.Sample {
		sampled += smp.Value[1]
	}
	measured := *s.PerRequest.CPUUS * float64(s.Window.Requests) * 1e3
	cov, ok := s.Checks["cpu_profile_coverage"]
	if !ok || math.Abs(cov-float64(sampled)/measured) > 0.01 || !strings.Contains(s.Sources["cpu_profile"], "runtime/pprof") {
		t.Errorf("cpu_profile_coverage %v (present %v), want %.3f: %d ns sampled of %.0f measured [%s]", cov, ok, float64(sampled)/measured, sampled, measured, s.Sources["cpu_profile"])
	}
	if cov < report.LowCPUProfileCoverage && !strings.Contains(stdout, "cpu profile") {
		t.Errorf("coverage %.3f, and the terminal does not say so:\n%s", cov, stdout)
	}
	names := []string{"allocs"}
	if sampled > 0 {
		names = append(names, "cpu")
	}
	for _, name := range names {
		fn := s.Files["flame_"+name]
		if fn == "" || !strings.Contains(readFile(t, filepath.Join(out, fn)), "var DATA = ") {
			t.Errorf("no flame graph of %s in the run folder (files %v)", name, s.Files)
		}
	}
	for _, want := range []string{"verdict", "allocs", "syscalls", "latency", "main.buildDocument"} {
		if !strings.Contains(stdout+readFile(t, filepath.Join(out, "report.md")), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestVersionedTarget probes a module/path/cmd/x@version from the module proxy.
func TestVersionedTarget(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := probeRun(t, "-out", out, "-path", "/get", "-args", "-host 127.0.0.1 -port 0", "github.com/mccutchen/go-httpbin/v2/cmd/go-httpbin@v2.26.0")
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var s schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	if s.Commit != "v2.26.0" || s.Window.Requests == 0 || s.Window.Errors+s.Window.Non2xx != 0 {
		t.Errorf("summary: commit %q, window %+v", s.Commit, s.Window)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stackHas reports whether any frame of s, inlined ones included, is fn.
func stackHas(s *profile.Sample, fn string) bool {
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && ln.Function.Name == fn {
				return true
			}
		}
	}
	return false
}

// TestCopiesGroundTruth measures /copy, whose copies are known exactly, with
// GOGC=1 and the CPU profiler on, so that GC and signals arrive while the
// recorder runs.
func TestCopiesGroundTruth(t *testing.T) {
	skipShort(t)
	copiesGroundTruth(t, nil, "")
}

// TestCopiesGroundTruthPs is TestCopiesGroundTruth with the target on every
// CPU (GOMAXPROCS 2 here): each P counts in counts of its own, without
// locked adds, and the sum over the Ps is still exact.
func TestCopiesGroundTruthPs(t *testing.T) {
	skipShort(t)
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: one P")
	}
	res := copiesGroundTruth(t, nil, "none")
	if res.Summary.GOMAXPROCS < 2 {
		t.Errorf("GOMAXPROCS %d: the target ran on one P", res.Summary.GOMAXPROCS)
	}
}

// TestCopiesGroundTruthARM64 is TestCopiesGroundTruth on probetarget built
// for linux/arm64 and run under qemu-user (probe run -exec): the arm64
// recorder's counts, whole stacks and buckets are the same.
func TestCopiesGroundTruthARM64(t *testing.T) {
	emulateARM64(t)
	res := copiesGroundTruth(t, []string{"qemu-aarch64-static"}, "")
	if res.Summary.GOARCH != "arm64" || res.Summary.Exec != "qemu-aarch64-static" {
		t.Errorf("summary: goarch %q exec %q", res.Summary.GOARCH, res.Summary.Exec)
	}
	if res.Summary.PerRequest.Syscalls != nil || !strings.Contains(res.Summary.Sources["syscalls"], "-exec qemu-aarch64-static") || !strings.Contains(res.Summary.Sources["cpu"], "emulator") {
		t.Errorf("under -exec: syscalls %v [%s], cpu [%s]", res.Summary.PerRequest.Syscalls, res.Summary.Sources["syscalls"], res.Summary.Sources["cpu"])
	}
}

// copiesGroundTruth runs /copy (under exec, when set) and holds its copy
// sites to the known figures.
func copiesGroundTruth(t *testing.T, exec []string, cpus string) *Result {
	t.Setenv("GOGC", "1")
	out := filepath.Join(t.TempDir(), "out")
	res, err := run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget", Exec: exec, CPUs: cpus}, Spec: load.Spec{Path: "/copy"}, WindowConfig: WindowConfig{Warmup: 300 * time.Millisecond, Duration: time.Second}, OutputConfig: OutputConfig{Out: out}}, internals{seams: seams{attributionCPUProfile: true}}, nil)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	if res.Summary.Sources["copies"] != SourceCopiesOverlay || res.Summary.PerRequest.CopyCalls == nil {
		t.Fatalf("copies not measured: source %q", res.Summary.Sources["copies"])
	}
	p, err := readProfile(filepath.Join(out, "copies.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	n := requestsComment(t, p)
	if res.Summary.CopiesWindow != nil || n != res.Summary.AttributionWindow.Requests {
		t.Fatalf("profile requests %d, attribution window %d, copies window %v: copies belong to the attribution window", n, res.Summary.AttributionWindow.Requests, res.Summary.CopiesWindow)
	}
	for _, tc := range []struct {
		leaf, under  string
		calls, bytes int64
		bucket       string
	}{
		{"main.copyN", "main.copyN", 1, 3000, "<16K"},
		{"main.str100", "main.str100", 1, 100, "<1K"},
		{"bytes.(*Buffer).Write", "main.bufWrites", 2, 400, "<1K"},
	} {
		var calls, bytes int64
		for _, s := range p.Sample {
			// runtime.stkbucket's copy (the memory profiler's bucket for
			// a sampled allocation) is charged to the site whose
			// allocation was sampled, now that stacks are whole: the
			// runtime's work, not the endpoint's known copies.
			if leafName(s) == tc.leaf && stackHas(s, tc.under) && s.Label["kind"][0] == "memmove" && s.Label["via"][0] != "runtime.stkbucket" &&
				(tc.leaf != "main.str100" || s.Label["via"][0] == "runtime.slicebytetostring") {
				calls += s.Value[0]
				bytes += s.Value[1]
				if s.Label["bucket"][0] != tc.bucket {
					t.Errorf("%s: bucket %q, want %q: %d calls, %d B, via %v, stack %s", tc.leaf, s.Label["bucket"][0], tc.bucket, s.Value[0], s.Value[1], s.Label["via"], stackString(s))
				}
			}
		}
		t.Logf("%s under %s: %d calls, %d bytes for %d requests", tc.leaf, tc.under, calls, bytes, n)
		if calls != tc.calls*n || bytes != tc.bytes*n {
			t.Errorf("%s under %s: %d calls, %d bytes for %d requests; want exactly %d and %d per request",
				tc.leaf, tc.under, calls, bytes, n, tc.calls, tc.bytes)
			for _, s := range p.Sample {
				if stackHas(s, tc.under) {
					t.Logf("  %v %v: %s", s.Value, s.Label, stackString(s))
				}
			}
		}
	}
	// Every request's own bill holds the same copies: main.copyN's one
	// memmove of 3000 B and bufWrites' two of 200, exactly (the bills'
	// copies are the recorder's own counts, on amd64 and arm64 alike).
	if b := res.Summary.Bills; b == nil || b.Kept == 0 {
		t.Errorf("no bills: %+v", b)
	} else {
		for _, g := range append([]schema.Bill{*b.Groups["p50"], *b.Groups["p99"]}, b.Exemplars...) {
			var copyN, buf [2]float64
			if g.Copies == nil {
				t.Fatalf("a bill of %.0f µs without copies", g.DurationUS)
			}
			for _, c := range g.Copies.Sites {
				switch {
				case c.Func == "main.copyN" && c.Kind == "memmove":
					copyN[0], copyN[1] = copyN[0]+c.Calls, copyN[1]+c.Bytes
				case c.Func == "bytes.(*Buffer).Write" && c.Kind == "memmove":
					buf[0], buf[1] = buf[0]+c.Calls, buf[1]+c.Bytes
				}
			}
			if copyN != [2]float64{1, 3000} || buf != [2]float64{2, 400} {
				t.Errorf("a bill of %.0f µs (%d requests): main.copyN %v, bytes.(*Buffer).Write %v; want 1 call of 3000 B, 2 of 400 B in all", g.DurationUS, g.Requests, copyN, buf)
			}
		}
	}
	// The report charges runtime copies to the first frame outside the runtime.
	found := false
	for _, s := range res.CopySites {
		if s.User == "main.str100" && s.Direct == "runtime.slicebytetostring" && s.Kind == "memmove" {
			found = s.TotalCalls() == n
		}
	}
	if !found {
		t.Errorf("no site main.str100 via runtime.slicebytetostring with %d calls", n)
	}
	if rep := readFile(t, filepath.Join(out, "report.md")); !strings.Contains(rep, "Top copy sites") || !strings.Contains(rep, "`main.copyN`") {
		t.Errorf("report.md lacks the copy sites:\n%s", rep)
	}
	return res
}

// TestCopiesUnsupported plays a toolchain whose runtime files have another
// shape: probe must measure without copy figures and say why.
func TestCopiesUnsupported(t *testing.T) {
	skipShort(t)
	unknown := func(goroot, goarch, dir string) (map[string]string, error) {
		return nil, capability.Shape("copyspy overlay", "memmove_amd64.s: no line %q (a Go release this overlay does not know)", "TEXT runtime·memmove")
	}
	var logb bytes.Buffer
	out := filepath.Join(t.TempDir(), "out")
	res, err := run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: "/none"}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: 500 * time.Millisecond}, OutputConfig: OutputConfig{Out: out}}, internals{seams: seams{copyOverlay: unknown}}, &logb)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	if src := res.Summary.Sources["copies"]; !strings.HasPrefix(src, "none: ") || !strings.Contains(src, "does not know") {
		t.Errorf("sources.copies = %q", src)
	}
	if res.Summary.PerRequest.CopyCalls != nil || res.Summary.CopiesWindow != nil {
		t.Error("copy figures present without the overlay")
	}
	if !strings.Contains(logb.String(), "measuring without copy figures") {
		t.Errorf("probe did not say it measures without copies:\n%s", logb.String())
	}
	if _, err := os.Stat(filepath.Join(out, "copies.pb.gz")); err == nil {
		t.Error("copies.pb.gz written without the overlay")
	}
}

// TestCopiesOverlayDoesNotBuild plays a runtime overlay that this Go
// release does not compile: probe builds again without it, keeping the
// agent, measures without copy figures and says why.
func TestCopiesOverlayDoesNotBuild(t *testing.T) {
	skipShort(t)
	broken := func(goroot, goarch, dir string) (map[string]string, error) {
		broken := filepath.Join(dir, "zz_broken.go")
		if err := os.WriteFile(broken, []byte("package runtime\n\nfunc perfspyBroken( {\n"), 0o644); err != nil {
			return nil, err
		}
		return map[string]string{filepath.Join(goroot, "src", "runtime", "zz_broken.go"): broken}, nil
	}
	res, err := run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: "/none"}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: 500 * time.Millisecond}, CountConfig: CountConfig{Allocs: "heapprofile"}, OutputConfig: OutputConfig{Out: filepath.Join(t.TempDir(), "out")}}, internals{seams: seams{copyOverlay: broken}}, nil)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	if src := res.Summary.Sources["copies"]; !strings.Contains(src, "did not build") || res.Summary.PerRequest.CopyCalls != nil {
		t.Errorf("sources.copies = %q, copy calls %v", src, res.Summary.PerRequest.CopyCalls)
	}
	if res.Summary.Window.Requests == 0 {
		t.Error("no requests measured: the plain build lost the agent or the target")
	}
}

// siteTotals sums a profile's first two values by leaf function.
func siteTotals(p *profile.Profile, vi ...int) map[string][2]int64 {
	m := map[string][2]int64{}
	for _, s := range p.Sample {
		v := m[leafName(s)]
		v[0] += s.Value[vi[0]]
		v[1] += s.Value[vi[1]]
		m[leafName(s)] = v
	}
	return m
}

// TestAllocspyGroundTruth counts known allocation sites with allocspy under
// GOGC=1 and the CPU profiler on: exact, not within a tolerance.
func TestAllocspyGroundTruth(t *testing.T) {
	skipShort(t)
	t.Setenv("GOGC", "1")
	for _, tc := range []struct {
		path string
		want map[string][2]int64 // leaf -> objects, bytes per request
		via  map[string]string
	}{
		{"/alloc", map[string][2]int64{"main.allocK7": {7, 7 * 64}}, map[string]string{"main.allocK7": "runtime.makeslice"}},
		{"/generic", map[string][2]int64{"main.genAlloc[...]": {2, 2 * 24}, "main.makeClosure.func1": {3, 3 * 48}},
			map[string]string{"main.genAlloc[...]": "runtime.newobject", "main.makeClosure.func1": "runtime.makeslice"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			res, err := run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: tc.path}, WindowConfig: WindowConfig{Warmup: 300 * time.Millisecond, Duration: time.Second}, OutputConfig: OutputConfig{Out: out}}, internals{seams: seams{attributionCPUProfile: true}}, nil)
			if err != nil && !errors.Is(err, ErrNotJudged) {
				t.Fatal(err)
			}
			checkNoOrphans(t)
			if res.Summary.Sources["allocs"] != SourceAllocspy {
				t.Fatalf("sources.allocs = %q", res.Summary.Sources["allocs"])
			}
			p, err := readProfile(filepath.Join(out, "allocs.pb.gz"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CheckValid(); err != nil {
				t.Fatal(err)
			}
			n := requestsComment(t, p)
			got := siteTotals(p, 0, 1)
			for fn, w := range tc.want {
				t.Logf("%s: %d objects, %d bytes for %d requests", fn, got[fn][0], got[fn][1], n)
				if got[fn][0] != w[0]*n || got[fn][1] != w[1]*n {
					t.Errorf("%s: %d objects, %d bytes for %d requests; want exactly %d and %d per request", fn, got[fn][0], got[fn][1], n, w[0], w[1])
				}
			}
			for _, s := range p.Sample {
				if via, ok := tc.via[leafName(s)]; ok && s.Label["via"][0] != via {
					t.Errorf("%s: via %q, want %q", leafName(s), s.Label["via"][0], via)
				}
			}
		})
	}
}

// TestAllocspyAgreesWithHeapProfile runs allocspy and the heap profile at
// MemProfileRate=1 in one window on httpjson: per whole stack (up to the
// runtime's 128 frames, as allocspy keeps them), allocspy's blocks and bytes
// must equal the heap profile's objects and bytes.
func TestAllocspyAgreesWithHeapProfile(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "out")
	_, err := run(context.Background(), Config{TargetConfig: TargetConfig{Target: DefaultTarget}, WindowConfig: WindowConfig{Warmup: 300 * time.Millisecond, Duration: time.Second}, OutputConfig: OutputConfig{Out: out}}, internals{seams: seams{crossCheck: true}}, nil)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	as, err := readProfile(filepath.Join(out, "allocs.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	hp, err := readProfile(filepath.Join(out, "allocs-heapprofile.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	// runtime/pprof spells a generic instantiation with its shape
	// (appendString[go.shape.string]), runtime.CallersFrames with [...]:
	// stackTotals spells both [...].
	// The heap profile charges an allocation the runtime made inside
	// another to the outer one's line; allocspy keeps its runtime leaf
	// (allocspy.NestedAlloc): fold it back to compare.
	// A stack of the runtime's own (a goroutine's stack made by malg on
	// the system stack) keeps the allocator's frame in the heap profile,
	// runtime.mallocgc, which allocspy's stacks begin above: drop it.
	a, h := map[string][2]int64{}, map[string][2]int64{}
	for st, v := range stackTotals(hp, 0, 1) {
		k := strings.TrimPrefix(st, "runtime.mallocgc;")
		h[k] = [2]int64{h[k][0] + v[0], h[k][1] + v[1]}
	}
	for st, v := range stackTotals(as, 2, 1) {
		k := heapProfileStack(st)
		a[k] = [2]int64{a[k][0] + v[0], a[k][1] + v[1]}
	}
	var total [2]int64
	deepest := 0
	for st, hv := range h {
		total[0] += hv[0]
		deepest = max(deepest, strings.Count(st, ";")+1)
		if a[st] != hv {
			t.Errorf("allocspy %d blocks %d bytes, heap profile %d objects %d bytes, at\n%s", a[st][0], a[st][1], hv[0], hv[1], strings.ReplaceAll(st, ";", "\n"))
		}
	}
	for st, av := range a {
		if _, ok := h[st]; !ok && av[0] != 0 {
			t.Errorf("allocspy %d blocks, absent from the heap profile, at\n%s", av[0], strings.ReplaceAll(st, ";", "\n"))
		}
	}
	t.Logf("%d stacks (the deepest %d frames), %d heap objects compared", len(h), deepest, total[0])
}

// heapProfileStack drops a stack's leading runtime frames unless every
// frame is the runtime's, as runtime/pprof's heap profile does.
func heapProfileStack(st string) string {
	frames := strings.Split(st, ";")
	for i, f := range frames {
		if !stacks.IsRuntime(f) {
			return strings.Join(frames[i:], ";")
		}
	}
	return st
}

// TestHeapProfileSource keeps the MemProfileRate=1 source working: the
// allocation window at rate 1, copies in a window of their own.
func TestHeapProfileSource(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := probeRun(t, "-allocs", "heapprofile", "-out", out, "-path", "/alloc", "./testdata/probetarget")
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var s schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	if s.Sources["allocs"] != SourceAllocsHeap || s.CopiesWindow == nil || s.Sources["copies"] != SourceCopiesOverlay {
		t.Errorf("sources %v, copies window %v", s.Sources, s.CopiesWindow)
	}
	p, err := readProfile(filepath.Join(out, "allocs.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	objs, _ := siteCount(p, "main.allocK7")
	if n := requestsComment(t, p); math.Abs(float64(objs)/float64(n)-7) > 7*0.005 {
		t.Errorf("main.allocK7: %d allocations for %d requests, want 7 per request", objs, n)
	}
}

// TestAllocsUnsupported plays a toolchain whose mallocgc has another shape:
// probe falls back to the heap profile and says why.
func TestAllocsUnsupported(t *testing.T) {
	skipShort(t)
	unknown := func(goroot, goarch, goexp, dir string) (map[string]string, error) {
		return nil, capability.Shape("allocspy overlay", "malloc.go: mallocgc has an unknown return %q (a Go release this overlay does not know)", "fast(size)")
	}
	var logb bytes.Buffer
	out := filepath.Join(t.TempDir(), "out")
	res, err := run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: "/alloc"}, CountConfig: CountConfig{Copies: "off"}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: 500 * time.Millisecond}, OutputConfig: OutputConfig{Out: out}}, internals{seams: seams{allocOverlay: unknown}}, &logb)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	if src := res.Summary.Sources["allocs"]; !strings.HasPrefix(src, SourceAllocsHeap+" (allocspy unavailable: ") || !strings.Contains(src, "does not know") {
		t.Errorf("sources.allocs = %q", src)
	}
	if res.Summary.PerRequest.Allocs == nil || !strings.Contains(logb.String(), "counting allocations with the heap profile") {
		t.Errorf("no fallback figures or message:\n%s", logb.String())
	}
}

// TestSyscallsByName: with eBPF (root), /getppid makes exactly one getppid
// per request, and the syscall profile puts all of them under the handler.
func TestSyscallsByName(t *testing.T) {
	skipShort(t)
	testtarget.RequireRoot(t, "counting syscalls with eBPF")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := probeRun(t, "-out", out, "-path", "/getppid", "./testdata/probetarget")
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var s schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	if s.Sources["syscalls"] != "bpf-tracepoint" {
		t.Fatalf("sources.syscalls = %q", s.Sources["syscalls"])
	}
	if g := s.PerRequest.SyscallsByName["getppid"]; g != 1 {
		t.Errorf("getppid per request = %v, want exactly 1", g)
	}
	var sum float64
	for _, v := range s.PerRequest.SyscallsByName {
		sum += v
	}
	if math.Abs(sum-*s.PerRequest.Syscalls) > 0.001 {
		t.Errorf("syscalls by name add up to %.4f, total %.4f", sum, *s.PerRequest.Syscalls)
	}
	p, err := readProfile(filepath.Join(out, "syscalls.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	n := requestsComment(t, p)
	var getppid, underHandler int64
	for _, smp := range p.Sample {
		if smp.Label["syscall"][0] != "getppid" {
			continue
		}
		getppid += smp.Value[0]
		for _, loc := range smp.Location {
			if strings.HasPrefix(loc.Line[len(loc.Line)-1].Function.Name, "main.main.func") {
				underHandler += smp.Value[0]
				break
			}
		}
	}
	t.Logf("getppid: %d in the attribution window, %d under the handler, %d requests", getppid, underHandler, n)
	if getppid != n || underHandler != n {
		t.Errorf("getppid: %d, under the handler %d, want %d (one per request)", getppid, underHandler, n)
	}
}

// TestSyscallsFallback plays a machine where eBPF is not allowed: probe
// counts the read/write family from /proc/PID/io and says why.
func TestSyscallsFallback(t *testing.T) {
	skipShort(t)
	noBPF := func(int) (*syscalls.Counter, error) {
		return nil, fmt.Errorf("counting syscalls needs eBPF (root, or CAP_BPF and CAP_PERFMON): %w", capability.ErrNotSupported)
	}
	out := filepath.Join(t.TempDir(), "out")
	var logb bytes.Buffer
	res, err := run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: "/write"}, CountConfig: CountConfig{Copies: "off"}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: 500 * time.Millisecond}, OutputConfig: OutputConfig{Out: out}}, internals{seams: seams{syscallsOpen: noBPF}}, &logb)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	if src := res.Summary.Sources["syscalls"]; !strings.HasPrefix(src, SourceSyscallsIO+" (eBPF unavailable: ") || !strings.Contains(src, "root") {
		t.Errorf("sources.syscalls = %q", src)
	}
	if len(res.Summary.PerRequest.SyscallsByName) != 0 || res.Summary.PerRequest.Syscalls == nil {
		t.Errorf("fallback figures: %v by name, total %v", res.Summary.PerRequest.SyscallsByName, res.Summary.PerRequest.Syscalls)
	}
	if _, err := os.Stat(filepath.Join(out, "syscalls.pb.gz")); err == nil {
		t.Error("syscalls.pb.gz written without eBPF")
	}
	if !strings.Contains(logb.String(), "/proc/PID/io") {
		t.Errorf("probe did not say it falls back:\n%s", logb.String())
	}
}

// TestOffCPUGroundTruth measures handlers that wait for known reasons.
// TestRequestSplit holds the off-CPU window's per-request split to
// handlers whose waits are known: the request's own time, closing on its
// duration and below the driver's latency, the background apart, and the
// slowest requests' wait.
func TestRequestSplit(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		path  string
		check func(t *testing.T, s *schema.Summary)
	}{
		// 64 pool workers: the request waits on a channel for one of them
		// (about 2 ms plus queueing); the worker sleeps, not the request;
		// the idle workers' waits are the background's.
		{"/pool?ms=2", func(t *testing.T, s *schema.Summary) {
			r := s.PerRequest.RequestUS
			if r["sync"] < 1800 || r["sync"] > r["total"] || r["sleep"] > 20 {
				t.Errorf("request sync %.1f µs, sleep %.1f, total %.1f: want sync ≥ 1800 and ≤ total, sleep near 0", r["sync"], r["sleep"], r["total"])
			}
			if s.BackgroundOffCPUUS["sleep"] < 1e5 || s.BackgroundOffCPUUS["sync"] < 1e6 {
				t.Errorf("background %v: want the workers' sleeps and idle waits", s.BackgroundOffCPUUS)
			}
			if len(s.BackgroundTop) == 0 || s.BackgroundTop[0].Func != "main.poolWorker" {
				t.Errorf("background top %+v: want the idle workers first", s.BackgroundTop)
			}
			top := s.Tail["p50"].Top
			if len(top) == 0 || top[0].Reason != "sync" || top[0].WokenBy != "main.poolWorker" {
				t.Errorf("median request's top wait %+v: want sync woken by main.poolWorker", top)
			}
		}},
		// A 1 ms nanosleep(2): the request's syscall part.
		{"/sysblock?ms=1", func(t *testing.T, s *schema.Summary) {
			if r := s.PerRequest.RequestUS; r["syscall"] < 900 || r["syscall"] > r["total"] {
				t.Errorf("request syscall %.1f µs of %.1f", r["syscall"], r["total"])
			}
		}},
		// Every 100th request waits 20 ms on a timer's channel: the slowest
		// 1% show it, the median request does not.
		{"/tail?every=100&ms=20", func(t *testing.T, s *schema.Summary) {
			p50, p99 := s.Tail["p50"], s.Tail["p99"]
			if p99.PartsUS["sync"] < 18000 || len(p99.Top) == 0 || p99.Top[0].Func != "main.tailWait" {
				t.Errorf("slowest 1%%: sync %.1f µs, top %+v: want 20 ms in main.tailWait", p99.PartsUS["sync"], p99.Top)
			}
			if p50.PartsUS["sync"] > 100 || p50.Requests < 10 {
				t.Errorf("median group (%d requests): sync %.1f µs, want none", p50.Requests, p50.PartsUS["sync"])
			}
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			res, err := Run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: tc.path}, CountConfig: CountConfig{Copies: "off", Allocs: "heapprofile"}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: 2 * time.Second, OffCPU: true}, OutputConfig: OutputConfig{Out: out}}, nil)
			if err != nil && !errors.Is(err, ErrNotJudged) {
				t.Fatal(err)
			}
			checkNoOrphans(t)
			checkRequestSplit(t, out, res.Summary, tc.check)
		})
	}
}

// checkRequestSplit holds what every request split must: its source, that
// its parts close on the total below the driver's latency, that
// offcpu_us is the split without cpu, that the profiles keep each scope
// apart, and that report.md shows it.
func checkRequestSplit(t *testing.T, out string, s *schema.Summary, check func(*testing.T, *schema.Summary)) {
	t.Helper()
	r := s.PerRequest.RequestUS
	t.Logf("request µs %v; checks %v", r, s.Checks)
	if s.Sources["offcpu"] != SourceOffCPU || r == nil || s.Checks["offcpu_requests"] < 100 {
		t.Fatalf("source %q, request split %v, %v requests", s.Sources["offcpu"], r, s.Checks["offcpu_requests"])
	}
	// The parts close on the total, and the total is the server's
	// share of the driver's latency.
	var sum float64
	for _, p := range schema.RequestParts {
		sum += r[p]
	}
	if math.Abs(r["total"]-sum) > 0.01*r["total"] || math.Abs(s.Checks["request_us_remainder"]) > 0.01*r["total"] {
		t.Errorf("parts sum to %.1f µs of %.1f (remainder %.1f)", sum, r["total"], s.Checks["request_us_remainder"])
	}
	if r["total"] >= s.Checks["driver_latency_mean_us"] {
		t.Errorf("server-side %.1f µs ≥ the driver's mean latency %.1f", r["total"], s.Checks["driver_latency_mean_us"])
	}
	for k, v := range s.PerRequest.OffCPUUS {
		if v != r[k] {
			t.Errorf("offcpu_us[%s] = %v, request_us[%s] = %v", k, v, k, r[k])
		}
	}
	check(t, s)
	// pprof opens the profiles; the requests' waits carry the
	// requests comment, the background's do not.
	for file, scope := range map[string]string{"offcpu.pb.gz": "request", "offcpu_background.pb.gz": "background"} {
		p, err := readProfile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.CheckValid(); err != nil {
			t.Fatal(err)
		}
		for _, smp := range p.Sample {
			if got := smp.Label["scope"][0]; got != scope {
				t.Fatalf("%s holds a wait of scope %s", file, got)
			}
		}
		hasReq := strings.Contains(strings.Join(p.Comments, " "), profkey.RequestsComment)
		if hasReq != (scope == "request") || len(p.Sample) == 0 {
			t.Errorf("%s: %d samples, requests comment %v", file, len(p.Sample), hasReq)
		}
	}
	report := readFile(t, filepath.Join(out, "report.md"))
	for _, want := range []string{"Server-side time per request", "Background waits", "slowest 1%"} {
		if !strings.Contains(report, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

func TestOffCPUGroundTruth(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		path, reason string
		minUS        float64
	}{
		{"/chanwait?ms=2", "sync", 1800},
		{"/sysblock?ms=1", "syscall", 900},
		{"/mutex?us=200", "sync", 100},
	} {
		t.Run(tc.path, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			res, err := Run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: tc.path}, CountConfig: CountConfig{Copies: "off"}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: time.Second, OffCPU: true, Wallclock: tc.path == "/mutex?us=200"}, OutputConfig: OutputConfig{Out: out}}, nil)
			if err != nil && !errors.Is(err, ErrNotJudged) {
				t.Fatal(err)
			}
			checkNoOrphans(t)
			s := res.Summary
			if s.Sources["offcpu"] != SourceOffCPU || s.OffCPUWindow == nil {
				t.Fatalf("sources.offcpu %q, window %v", s.Sources["offcpu"], s.OffCPUWindow)
			}
			got := s.PerRequest.OffCPUUS[tc.reason]
			t.Logf("%s: off-CPU µs/req %v", tc.path, s.PerRequest.OffCPUUS)
			if got < tc.minUS {
				t.Errorf("%s: %s %.1f µs per request, want at least %.0f", tc.path, tc.reason, got, tc.minUS)
			}
			p, err := readProfile(filepath.Join(out, "offcpu.pb.gz"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CheckValid(); err != nil {
				t.Fatal(err)
			}
			// The handler's waits carry the handler's stack; the tracer's
			// and profilers' own goroutines are not the target's.
			var under int64
			for _, smp := range p.Sample {
				if throughInstruments(smp) {
					t.Errorf("offcpu.pb.gz holds a wait of perfspy's own: %s", leafName(smp))
				}
				if smp.Label["reason"][0] == tc.reason && stackHasPrefix(smp, "main.main.func") {
					under += smp.Value[0]
				}
			}
			if float64(under)/1e3/float64(s.OffCPUWindow.Requests) < tc.minUS {
				t.Errorf("%s: only %d ns of %s under the handler", tc.path, under, tc.reason)
			}
			if tc.path != "/mutex?us=200" {
				return
			}
			// The block profile sees the waiters, the mutex profile the
			// holder that made them wait, the wall-clock profile everyone.
			for _, name := range []string{"block", "mutex", "wallclock"} {
				p, err := readProfile(filepath.Join(out, name+".pb.gz"))
				if err != nil {
					t.Fatal(err)
				}
				var v int64
				for _, smp := range p.Sample {
					if throughInstruments(smp) {
						t.Errorf("%s.pb.gz holds a sample of perfspy's own: %s", name, leafName(smp))
					}
					if stackHasPrefix(smp, "main.main.func") {
						v += smp.Value[len(smp.Value)-1]
					}
				}
				t.Logf("%s.pb.gz: %d under the handler", name, v)
				if v <= 0 {
					t.Errorf("%s.pb.gz: nothing under the handler", name)
				}
			}
		})
	}
}

func stackHasPrefix(s *profile.Sample, prefix string) bool {
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && strings.HasPrefix(ln.Function.Name, prefix) {
				return true
			}
		}
	}
	return false
}

// TestFloor: -floor measures targets/floor beside the target and reports
// the target's CPU per request against it.
func TestFloor(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "out")
	res, err := Run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: "/spin?us=200"}, CountConfig: CountConfig{Copies: "off"}, WindowConfig: WindowConfig{Warmup: 300 * time.Millisecond, Duration: time.Second, Floor: true}, OutputConfig: OutputConfig{Out: out}}, nil)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	f := res.Summary.Floor
	if f == nil || f.CPUUS <= 0 {
		t.Fatalf("no floor figures: %+v", f)
	}
	cpu := *res.Summary.PerRequest.CPUUS
	t.Logf("target %.1f µs/req, floor %.1f µs/req, ratio %.2f", cpu, f.CPUUS, f.CPURatio)
	if math.Abs(f.CPURatio-cpu/f.CPUUS) > 0.01 || f.CPURatio < 2 {
		t.Errorf("ratio %.3f for %.1f / %.1f µs; a 200 µs spin is several floors", f.CPURatio, cpu, f.CPUUS)
	}
	if !strings.Contains(readFile(t, filepath.Join(out, "report.md")), "CPU vs the floor") {
		t.Error("report.md lacks the floor row")
	}
}

// TestLightTargetJudged: with the lean HTTP driver (the default), the
// lightest server there is, targets/floor (a 2-byte response), is judged
// on a 2-core machine: the driver costs less than the server, so the
// server sets the pace. A noisy machine (steal time in a VM) gets two more tries.
func TestLightTargetJudged(t *testing.T) {
	judgedLight(t, "../targets/floor", func(out, stdout string) {
		if !strings.Contains(stdout, "driver        lean:") {
			t.Errorf("not the lean driver:\n%s", stdout)
		}
	})
}

// judgedLight runs a light target until a run is judged (three tries),
// then calls check with its results folder and output. A run that names
// a busy machine (its threads waited in a run queue) cannot be judged
// there, and that is the right answer: retried once, then skipped with
// the reason.
func judgedLight(t *testing.T, target string, check func(out, stdout string)) {
	t.Helper()
	skipShort(t)
	if runtime.NumCPU() < 2 {
		t.Skip("skipped: needs 2 cores, one for the server and one for the driver")
	}
	var stdout, stderr string
	busy := 0
	for try := 1; try <= 3; try++ {
		out := filepath.Join(t.TempDir(), "out")
		var code int
		code, stdout, stderr = probeRun(t, "-offcpu=false", "-copies", "off", "-duration", "2s", "-out", out, target)
		if code == ExitOK {
			check(out, stdout)
			return
		}
		t.Logf("try %d: exit %d\n%s%s", try, code, stdout, stderr)
		if code == ExitNotJudged && strings.Contains(stdout, "the machine was busy") {
			if busy++; busy == 2 {
				t.Skipf("skipped: the machine was busy in two runs (the run said so):\n%s", stdout)
			}
		}
	}
	t.Errorf("%s not judged in three tries:\n%s%s", target, stdout, stderr)
}

// busyLoops starts a CPU-bound process on each of cpus, ended with the
// test.
func busyLoops(t *testing.T, cpus ...int) {
	for _, c := range cpus {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := pinPid(cmd.Process.Pid, c); err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// busyMachineRun runs targets/floor (with extra flags) beside CPU-bound
// processes on the target's and the driver's CPUs, asks that it is not
// judged, and returns its terminal and summary.
func busyMachineRun(t *testing.T, extra ...string) (string, schema.Summary) {
	t.Helper()
	skipShort(t)
	if runtime.NumCPU() < 2 {
		t.Skip("skipped: needs 2 cores, one for the server and one for the driver")
	}
	busyLoops(t, 0, 1)
	out := filepath.Join(t.TempDir(), "out")
	var o, e bytes.Buffer
	args := append([]string{"run", "-q", "-warmup", "300ms", "-duration", "2s", "-offcpu=false", "-copies", "off", "-cpus", "0:1", "-out", out}, extra...)
	code := Main(context.Background(), append(args, "../targets/floor"), &o, &e)
	checkNoOrphans(t)
	if code != ExitNotJudged {
		t.Fatalf("exit %d, want %d:\n%s%s", code, ExitNotJudged, o.String(), e.String())
	}
	var s schema.Summary
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return o.String(), s
}

// TestBusyMachineNamed: with CPU-bound processes on the target's and the
// driver's CPUs, the light target is not judged, and the reason is the
// machine, with its figures, not the server or -conns.
func TestBusyMachineNamed(t *testing.T) {
	o, s := busyMachineRun(t)
	if !strings.Contains(o, "the machine was busy, not the server") || strings.Contains(o, "raise -conns") {
		t.Fatalf("not judged, but:\n%s", o)
	}
	if !strings.Contains(o, "  machine       busy: target waited") {
		t.Errorf("the terminal does not show the machine line:\n%s", o)
	}
	m := s.Machine
	if m == nil || !m.Busy || m.ServerRunQueueWait < BusyMachineWait || m.OtherCores < 0.5 {
		t.Errorf("summary.json machine %+v, want busy, a wait of at least %.1f s/s and the busy loops' cores", m, BusyMachineWait)
	}
	t.Logf("machine: %+v", m)
}

// TestBusyChildIsTarget: a target whose own child process keeps a core
// busy (probetarget -burn-child, on the target's CPU) is not a busy
// machine: the child's cores are the target's (machine.target_child_cores),
// left out of other_cores, and no reason blames the machine.
func TestBusyChildIsTarget(t *testing.T) {
	skipShort(t)
	if runtime.NumCPU() < 2 {
		t.Skip("skipped: needs 2 cores, one for the server and one for the driver")
	}
	out := filepath.Join(t.TempDir(), "out")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"run", "-q", "-warmup", "300ms", "-duration", "2s", "-offcpu=false", "-copies", "off", "-retained=false", "-cpus", "0:1", "-path", "/users/1", "-out", out, "-args", "-burn-child", "./testdata/probetarget"}, &o, &e)
	checkNoOrphans(t)
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d:\n%s%s", code, o.String(), e.String())
	}
	var s schema.Summary
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	m := s.Machine
	if m == nil || m.TargetChildCores < 0.1 {
		t.Fatalf("machine %+v: want the child's cores on the target (target_child_cores)", m)
	}
	t.Logf("machine %+v; verdict %s %v", m, s.Verdict, s.Reasons)
	// On a machine other processes keep busy the verdict is theirs to
	// name; the child's share must still be the target's, which only an
	// otherwise idle machine shows whole.
	if others := otherProcessesCores(); others >= 0.3 {
		t.Logf("other processes use %.2f cores now: the machine's verdict is not checked", others)
		return
	}
	if m.OtherCores >= BusyOtherCores || m.Busy {
		t.Errorf("machine %+v: want the child's core on the target, not other processes'", m)
	}
	if strings.Contains(o.String(), "the machine was busy") || strings.Contains(o.String(), "raise -conns") {
		t.Errorf("the machine, or too few requests in flight, blamed for the target's own child:\n%s", o.String())
	}
}

// otherProcessesCores is the cores the machine's processes use over half a
// second (/proc/stat), this test's own being idle.
func otherProcessesCores() float64 {
	m0 := proc.ReadMachine()
	time.Sleep(500 * time.Millisecond)
	return proc.ReadMachine().Since(m0, 0.5).BusyCores
}

// TestRateBusyMachine: under -rate, with CPU-bound processes on the
// target's and the driver's CPUs, the latencies from the intended send are
// the machine's (a p99 of 311 ms where the code's is 20): the run is not
// judged (exit 3), the reason says who waited for a CPU and how long, and
// the counts stand.
func TestRateBusyMachine(t *testing.T) {
	o, s := busyMachineRun(t, "-rate", "500", "-retained=false")
	if !strings.Contains(o, "not judged: the latencies are the machine's: the target waited for a CPU") {
		t.Fatalf("not judged, but:\n%s", o)
	}
	if s.Verdict != VerdictNotJudged || s.PerRequest.Allocs == nil || s.Window.Rate != 500 {
		t.Errorf("verdict %q, allocs %v, rate %v: want not judged with its counts", s.Verdict, s.PerRequest.Allocs, s.Window.Rate)
	}
	t.Logf("machine %+v, server cores %.3f, driver %+v; p99 %d µs", *s.Machine, s.ServerCores, *s.Driver, s.Window.LatencyUS["p99"])
}

// stackString is a sample's stack, innermost first.
func stackString(s *profile.Sample) string {
	var fns []string
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			fns = append(fns, ln.Function.Name)
		}
	}
	return strings.Join(fns, " < ")
}

// TestOpenLoop: probetarget's /stall holds a lock 100 ms once a second.
// With -rate 2000, latency from each request's intended send has the
// stall's arithmetic, p99 = 100 - 1% of 1000 = 90 ms (within 5%); the same
// requests timed from their actual send, as a closed loop times them,
// show a p99 that hides the stall; the run is judged by the rate held,
// not by the server's idle cores.
func TestOpenLoop(t *testing.T) {
	skipShort(t)
	stalls := filepath.Join(t.TempDir(), "stalls.jsonl")
	t.Setenv("PROBETARGET_STALL_LOG", stalls)
	m := runTarget(t, "/stall", "-rate", "2000", "-duration", "3s", "-exact-duration", "1s", "-warmup", "1s", "-offcpu=false", "-retained=false")
	w := m.summary["window"].(map[string]any)
	p99 := w["latency_us"].(map[string]any)["p99"].(float64) / 1000
	raw := w["latency_raw_us"].(map[string]any)["p99"].(float64) / 1000
	want, hold, drain := stallArithmetic(t, stalls, 2000)
	t.Logf("p99 %.1f ms from the intended send, %.1f ms from the actual send; the stall's arithmetic %.1f ms (held %.1f ms, less 10 ms, the backlog's 20th request %.1f ms after the release); %v scheduled, %v late, %v dropped; verdict %v %v",
		p99, raw, want, hold, drain, w["scheduled_sends"], w["late_sends"], w["dropped_sends"], m.summary["verdict"], m.summary["reasons"])
	if math.Abs(p99-want)/want > 0.05 {
		t.Errorf("p99 from the intended send %.1f ms, want the stall's %.1f ms within 5%%", p99, want)
	}
	if raw > 20 {
		t.Errorf("p99 from the actual send %.1f ms: want it to hide the stall", raw)
	}
	if w["rate"] != 2000.0 || w["arrivals"] != "constant" || m.summary["verdict"] != VerdictRateHeld {
		t.Errorf("rate %v arrivals %v verdict %v", w["rate"], w["arrivals"], m.summary["verdict"])
	}
}

// stallArithmetic reads the target's stall log and returns what an
// open-loop driver's p99 should be at rate requests a second: the slowest
// 1% of a second's requests are the first rate/100 to arrive during a
// hold, and the last of them waits for the hold's end less 10 ms, then
// for the backlog ahead of it to drain. The target measures the hold and
// the drain; the medians over the run's holds are returned in ms.
func stallArithmetic(t *testing.T, log string, rate int) (want, hold, drain float64) {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the target's stall log: %v", err)
	}
	k := rate / 100
	var holds, drains []float64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			HoldUS  float64   `json:"hold_us"`
			AfterUS []float64 `json:"after_us"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("the target's stall log %s: %v", log, err)
		}
		if len(l.AfterUS) >= k {
			holds = append(holds, l.HoldUS/1000)
			drains = append(drains, l.AfterUS[k-1]/1000)
		}
	}
	if len(holds) < 3 {
		t.Fatalf("the target's stall log has %d holds with a backlog of %d: %s", len(holds), k, b)
	}
	hold, drain = medianOf(holds), medianOf(drains)
	return hold - 1000/100 + drain, hold, drain
}
