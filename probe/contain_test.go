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

// alive tells a running process from a gone or zombie one.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// TestNothingLeft: the target's children, one of them in a session of
// its own, end with probe however probe ends: SIGKILL (probe cannot clean
// up; the watchdog does), SIGINT and SIGTERM.
func TestNothingLeft(t *testing.T) {
	skipShort(t)
	bin := buildProbe(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids")
			cmd := exec.Command(bin, "run", "-warmup", "0s", "-duration", "30s", "-offcpu=false", "-out", filepath.Join(t.TempDir(), "out"),
				"-args", "-spawn "+pidFile, "./testdata/probetarget")
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stderr)
			var seen []string
			for sc.Scan() {
				seen = append(seen, sc.Text())
				if strings.Contains(sc.Text(), "snapshot 1") {
					break
				}
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				cmd.Process.Kill()
				t.Fatalf("the target wrote no pids (%v); probe said:\n%s", err, strings.Join(seen, "\n"))
			}
			var pids []int
			for _, f := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(f)
				pids = append(pids, n)
			}
			if len(pids) != 2 || !alive(pids[0]) || !alive(pids[1]) {
				t.Fatalf("children %v not running", pids)
			}
			go func() {
				for sc.Scan() {
				}
			}()
			cmd.Process.Signal(sig)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("probe did not exit within 30s")
			}
			deadline := time.Now().Add(10 * time.Second)
			for _, pid := range pids {
				for alive(pid) && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if alive(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("after %v to probe, the target's child %d is still running", sig, pid)
				}
			}
			checkNoOrphans(t)
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
	cmd := exec.Command(bin, "run", "-out", filepath.Join(t.TempDir(), "out"), "./testdata/probetarget")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "PERFSPY_CACHE="+cache, "GOCACHE="+filepath.Join(cache, "gocache"))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "building") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	time.Sleep(3 * time.Second) // compilers running
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("probe did not exit within 30s of SIGINT")
	}
	time.Sleep(500 * time.Millisecond)
	for _, pid := range allPIDs() {
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
