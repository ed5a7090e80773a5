package probe

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/load"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/proc"
)

func instructionsPerRequest(t *testing.T, target, path string, requests int) float64 {
	t.Helper()
	res, err := Run(context.Background(), Config{TargetConfig: TargetConfig{Target: target}, Spec: load.Spec{Path: path}, WindowConfig: WindowConfig{Instructions: true, Requests: requests}, OutputConfig: OutputConfig{Out: filepath.Join(t.TempDir(), "out")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	if res.Summary.Verdict != VerdictCountsOnly || res.Summary.Sources["instructions"] != SourceInstructions {
		t.Fatalf("verdict %q, sources %v", res.Summary.Verdict, res.Summary.Sources)
	}
	p, err := readProfile(filepath.Join(res.Dir, "instructions.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	// callgrind's counts repeat to a fraction of a percent, not exactly
	// (the metric table judges them by the runs' spread): not exact.
	if b := readFile(t, filepath.Join(res.Dir, "bench.txt")); !strings.Contains(b, "instructions/req") || strings.Contains(b, "Unit instructions/req assume=exact") {
		t.Errorf("bench.txt: want instructions/req, not declared exact:\n%s", b)
	}
	// The profile holds the whole window; the figure is the window less
	// sysmon, both shown in the checks. sysmon sleeps through the window
	// (it cost 0.3% of httpjson's count when a system call woke it).
	var sum int64
	for _, s := range p.Sample {
		sum += s.Value[0]
	}
	c := res.Summary.Checks
	n := float64(res.Summary.Window.Requests)
	if math.Abs(float64(sum)/n-c["instructions_total_per_req"]) > 0.01 ||
		math.Abs(c["instructions_total_per_req"]-c["instructions_sysmon_per_req"]-*res.Summary.PerRequest.Instructions) > 0.02 ||
		c["instructions_sysmon_per_req"] > 0.001*c["instructions_total_per_req"] {
		t.Errorf("profile %d over %v requests; checks %v; figure %v", sum, n, c, *res.Summary.PerRequest.Instructions)
	}
	return *res.Summary.PerRequest.Instructions
}

// loopLength reads the disassembly of probetarget's main.burn and counts
// the instructions of its loop: from the target of the backward jump to
// the jump. It is the oracle of the instruction counts.
func loopLength(t *testing.T) int {
	t.Helper()
	return loopLengthIn(t, ".", "./testdata/probetarget", "main.burn")
}

// loopLengthIn builds pkg in dir with -tags valgrind and counts the
// instructions of fn's loop in its disassembly.
func loopLengthIn(t *testing.T, dir, pkg, fn string) int {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "target")
	build := exec.Command("go", "build", "-tags", "valgrind", "-o", bin, pkg)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	return loopLengthOf(t, bin, fn)
}

// loopLengthOf counts the instructions of fn's loop in bin's disassembly:
// from the target of the backward jump to the jump.
func loopLengthOf(t *testing.T, bin, fn string) int {
	t.Helper()
	out, err := exec.Command("go", "tool", "objdump", "-s", "^"+regexp.QuoteMeta(fn)+"$", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	var jump, target uint64
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[1], "0x") {
			continue
		}
		a, _ := strconv.ParseUint(f[1][2:], 16, 64)
		addrs = append(addrs, a)
		if strings.HasPrefix(f[3], "J") && len(f) >= 5 && strings.HasPrefix(f[4], "0x") {
			if to, _ := strconv.ParseUint(f[4][2:], 16, 64); to < a {
				jump, target = a, to
			}
		}
	}
	n := 0
	for _, a := range addrs {
		if a >= target && a <= jump {
			n++
		}
	}
	if jump == 0 || n == 0 {
		t.Fatalf("no loop in %s:\n%s", fn, out)
	}
	return n
}

// TestInstructions: a handler's known loop shows in instructions per
// request as the disassembly says.
func TestInstructions(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	body := loopLength(t)
	// The baseline's run-to-run noise (0.05% of about 37,000 here), divided
	// by many iterations, is small.
	const n = 200000
	i0 := instructionsPerRequest(t, "./testdata/probetarget", "/loop?n=0", 300)
	iN := instructionsPerRequest(t, "./testdata/probetarget", "/loop?n=200000", 300)
	per := (iN - i0) / n
	t.Logf("instructions/req: n=0 %.2f, n=%d %.2f; %.4f per iteration, the disassembly's loop has %d", i0, n, iN, per, body)
	if math.Abs(per-float64(body)) > 0.01*float64(body) {
		t.Errorf("%.4f instructions per loop iteration, the loop has %d", per, body)
	}
}

// TestInstructionsRepeat: three runs of the default target's binary agree
// within 0.1% per request.
func TestInstructionsRepeat(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	var runs []float64
	for k := 0; k < 3; k++ {
		runs = append(runs, instructionsPerRequest(t, "../"+DefaultTarget, "/json", 1000))
	}
	sorted := slices.Sorted(slices.Values(runs))
	lo, hi := sorted[0], sorted[2]
	t.Logf("instructions/req of three runs: %.2f; spread %.3f%%", runs, 100*(hi-lo)/lo)
	if hi-lo > 0.001*lo {
		t.Errorf("runs of one binary differ by more than 0.1%%: %.2f", runs)
	}
}

// TestInstructionsContended: the instructions window, run four times on
// a server whose requests contend a runtime lock across Ps (probetarget's
// /contend: 64 pairs of goroutines on one channel), ends every time with
// its figure. Under callgrind a contended runtime lock once killed the
// target now and then: lock2 reads the tick counter with RDTSCP, which
// valgrind 3.19 does not decode (SIGILL; 1 run in 3 here without
// cpu.rdtscp=off, so four runs catch it 4 times in 5).
func TestInstructionsContended(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	for k := range 4 {
		out := filepath.Join(t.TempDir(), "out")
		res, err := Run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, Spec: load.Spec{Path: "/contend?g=64&n=100"}, WindowConfig: WindowConfig{Instructions: true, Requests: 200}, OutputConfig: OutputConfig{Out: out}}, nil)
		checkNoOrphans(t)
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(out, "target.log"))
			t.Fatalf("run %d: %v\ntarget.log:\n%s", k+1, err, lastLines(string(log), 30))
		}
		if res.Summary.PerRequest.Instructions == nil || *res.Summary.PerRequest.Instructions <= 0 {
			t.Fatalf("run %d: no instructions per request (verdict %q)", k+1, res.Summary.Verdict)
		}
		t.Logf("run %d: %.0f instructions/req", k+1, *res.Summary.PerRequest.Instructions)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestInstructionsNoValgrind(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	dir := t.TempDir()
	os.Symlink(goBin, filepath.Join(dir, "go"))
	t.Setenv("PATH", dir)
	_, err = Run(context.Background(), Config{TargetConfig: TargetConfig{Target: "./testdata/probetarget"}, WindowConfig: WindowConfig{Instructions: true}, OutputConfig: OutputConfig{Out: filepath.Join(t.TempDir(), "out")}}, nil)
	if !errors.Is(err, capability.ErrNotSupported) || !strings.Contains(err.Error(), "Debian package valgrind") {
		t.Errorf("without valgrind: %v", err)
	}
}

// TestDumpEndsWithTarget: a dump whose valgrind died (callgrind asserts on
// some signals) ends with the target instead of waiting for an answer
// that never comes; one that gets no answer ends after dumpTimeout.
func TestDumpEndsWithTarget(t *testing.T) {
	dir := t.TempDir()
	control := filepath.Join(dir, "callgrind_control")
	if err := os.WriteFile(control, []byte("#!/bin/sh\nexec sleep 100\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target, want string
	}{{"0.3", "the target ended"}, {"100", "no answer within"}} {
		p, err := proc.Start("/bin/sleep", []string{tc.target}, nil, filepath.Join(dir, "target.log"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Stop()
		old := dumpTimeout
		dumpTimeout = time.Second
		start := time.Now()
		err = (&callgrindRun{s: &session{p: p}, control: control}).dump(context.Background())
		dumpTimeout = old
		if err == nil || !strings.Contains(err.Error(), tc.want) || time.Since(start) > 10*time.Second {
			t.Errorf("target sleep %s: dump ended after %s with %v, want %q", tc.target, time.Since(start).Round(time.Millisecond), err, tc.want)
		}
	}
}
