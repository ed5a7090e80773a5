package probe

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfspy/perfspy/internal/contain"

	"github.com/perfspy/perfspy/internal/proc"

	"runtime"
)

// buildProbe builds the probe command for tests that signal it.
func buildProbe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probe")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/probe").CombinedOutput(); err != nil {
		t.Fatalf("building probe: %v\n%s", err, out)
	}
	return bin
}

// probeProc is a probe command run as a process, its standard error read.
type probeProc struct {
	cmd  *exec.Cmd
	sc   *bufio.Scanner
	seen []string // its lines so far
}

// startProbe starts bin with args (env added to the environment) and
// reads its standard error until a line holds until.
func startProbe(t *testing.T, bin, until string, env []string, args ...string) *probeProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &probeProc{cmd: cmd, sc: bufio.NewScanner(stderr)}
	for p.sc.Scan() {
		p.seen = append(p.seen, p.sc.Text())
		if strings.Contains(p.sc.Text(), until) {
			break
		}
	}
	return p
}

func (p *probeProc) said() string { return strings.Join(p.seen, "\n") }

// stop sends sig and waits for the process to exit, reading the rest of
// its standard error; a process still running after within is killed and
// the test fails.
func (p *probeProc) stop(t *testing.T, sig syscall.Signal, within time.Duration) error {
	t.Helper()
	p.cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() {
		for p.sc.Scan() {
			p.seen = append(p.seen, p.sc.Text())
		}
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		p.cmd.Process.Kill()
		t.Fatalf("probe did not exit within %v of %v", within, sig)
	}
	return nil
}

// TestNothingLeft: the target's children, one of them in a session of
// its own, end with probe however probe ends: SIGKILL (probe cannot clean
// up; the watchdog does), SIGINT and SIGTERM; and the run's private
// folder (the agent's socket) is gone.
func TestNothingLeft(t *testing.T) {
	skipShort(t)
	bin := buildProbe(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			pidFile, tmp := filepath.Join(t.TempDir(), "pids"), t.TempDir()
			p := startProbe(t, bin, "snapshot 1", []string{"TMPDIR=" + tmp}, "run", "-warmup", "0s", "-duration", "30s", "-offcpu=false", "-out", filepath.Join(t.TempDir(), "out"),
				"-args", "-spawn "+pidFile, "./testdata/probetarget")
			b, err := os.ReadFile(pidFile)
			if err != nil {
				p.cmd.Process.Kill()
				t.Fatalf("the target wrote no pids (%v); probe said:\n%s", err, p.said())
			}
			var pids []int
			for _, f := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(f)
				pids = append(pids, n)
			}
			if len(pids) != 2 || !contain.Running(pids[0]) || !contain.Running(pids[1]) {
				t.Fatalf("children %v not running", pids)
			}
			p.stop(t, sig, 30*time.Second)
			deadline := time.Now().Add(10 * time.Second)
			for _, pid := range pids {
				for contain.Running(pid) && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if contain.Running(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("after %v to probe, the target's child %d is still running", sig, pid)
				}
			}
			// After SIGKILL the watchdog ends the group: the target may
			// still be on its way out when its children are gone.
			for len(orphans()) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			checkNoOrphans(t)
			left := func() []string { m, _ := filepath.Glob(filepath.Join(tmp, "perfspy-*")); return m }
			for len(left()) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if m := left(); len(m) > 0 {
				t.Errorf("after %v to probe, its private folder is left: %v", sig, m)
			}
		})
	}
}

// TestBuildInterrupted: Ctrl-C in the middle of a build stops the go
// command and its compilers, and leaves no temporary folder.
func TestBuildInterrupted(t *testing.T) {
	skipShort(t)
	bin := buildProbe(t)
	tmp := t.TempDir()
	cache := t.TempDir() // an empty cache: the build takes long enough
	p := startProbe(t, bin, "building", []string{"TMPDIR=" + tmp, "PERFSPY_CACHE=" + cache, "GOCACHE=" + filepath.Join(cache, "gocache")},
		"run", "-out", filepath.Join(t.TempDir(), "out"), "./testdata/probetarget")
	time.Sleep(3 * time.Second) // compilers running
	p.stop(t, syscall.SIGINT, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	for _, pid := range proc.AllPIDs() {
		if env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err == nil && strings.Contains(string(env), "PERFSPY_CACHE="+cache) {
			exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
			t.Errorf("pid %d (%s) of the interrupted build is still running", pid, exe)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, dir := range []string{tmp, cache} {
		matches, _ := filepath.Glob(filepath.Join(dir, "go-build*"))
		more, _ := filepath.Glob(filepath.Join(dir, "build-*"))
		if len(matches)+len(more) > 0 {
			t.Errorf("left behind: %v %v", matches, more)
		}
	}
}

// TestTwoRunsDoNotShareCPUs: a second probe run on the machine does not
// pin to the CPUs the first holds: it waits for them (two CPUs), or takes
// others (more), and says so.
func TestTwoRunsDoNotShareCPUs(t *testing.T) {
	skipShort(t)
	if runtime.NumCPU() < 2 {
		t.Skip("skipped: needs 2 CPUs to pin")
	}
	bin := buildProbe(t)
	outA, outB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	first := startProbe(t, bin, "snapshot 1", nil, "run", "-warmup", "0s", "-duration", "3s", "-offcpu=false", "-copies", "off", "-out", outA, "../targets/floor")
	second := exec.Command(bin, "run", "-warmup", "0s", "-duration", "1s", "-offcpu=false", "-copies", "off", "-out", outB, "../targets/floor")
	b, _ := second.CombinedOutput()
	first.stop(t, syscall.Signal(0), 60*time.Second) // signal 0: wait for it to end
	metaA, _ := os.ReadFile(filepath.Join(outA, "meta"))
	metaB, _ := os.ReadFile(filepath.Join(outB, "meta"))
	line := func(meta []byte, key string) string {
		for _, l := range strings.Split(string(meta), "\n") {
			if v, ok := strings.CutPrefix(l, key+": "); ok {
				return v
			}
		}
		return ""
	}
	if line(metaA, "cpus-server") == "" || line(metaB, "cpus-server") == "" {
		t.Fatalf("a run has no meta:\n%s\n%s", metaA, b)
	}
	waited := strings.Contains(string(b), "waiting for CPUs: another probe run holds")
	if !waited && line(metaA, "cpus-server") == line(metaB, "cpus-server") {
		t.Errorf("both runs pinned their targets to cpus %s, and the second did not wait:\n%s", line(metaA, "cpus-server"), b)
	}
	if runtime.NumCPU() <= 3 && !waited {
		t.Errorf("with %d CPUs the second run should have waited for the first's:\n%s", runtime.NumCPU(), b)
	}
}
