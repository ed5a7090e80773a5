package contain

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// family starts, in g, a shell that starts a child in its process group
// and one in a session of its own, then exits itself: both children are
// orphans. It returns their pids.
func family(t *testing.T, g *Group) []int {
	t.Helper()
	pids := filepath.Join(t.TempDir(), "pids")
	cmd := exec.Command("/bin/sh", "-c", `sleep 300 & a=$!; setsid sleep 300 & b=$!; echo "$a $b" > "$1"`, "sh", pids)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	g.Prepare(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.Started(cmd.Process.Pid)
	cmd.Wait()
	out := readPids(pids, 2)
	if len(out) != 2 {
		t.Fatalf("children not started: %v", out)
	}
	time.Sleep(100 * time.Millisecond) // setsid has run
	return out
}

// readPids waits (up to 5 s) until file holds n pids, and returns those
// it holds.
func readPids(file string, n int) []int {
	var out []int
	for i := 0; i < 100 && len(out) < n; i++ {
		time.Sleep(50 * time.Millisecond)
		b, _ := os.ReadFile(file)
		out = out[:0]
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			out = append(out, p)
		}
	}
	return out
}

func checkGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		for i := 0; i < 100 && Running(pid); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if Running(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("pid %d outlived its group", pid)
		}
	}
}

// TestClose: Close ends orphans of the group, one in a session of its
// own included, with a cgroup and without.
func TestClose(t *testing.T) {
	for _, opt := range []Options{{}, {NoCgroup: true}} {
		g, err := New(opt)
		if err != nil {
			t.Fatal(err)
		}
		if !opt.NoCgroup && g.Cgroup() == "" {
			t.Log("no cgroup on this machine: the process group alone")
		}
		pids := family(t, g)
		g.Close()
		checkGone(t, pids)
		if g.Cgroup() != "" {
			if _, err := os.Stat(g.Cgroup()); err == nil {
				t.Errorf("cgroup %s left", g.Cgroup())
			}
		}
	}
}

// TestWatchdog: when the pipe to the watchdog closes without "done" (the
// owner died), it kills the group.
func TestWatchdog(t *testing.T) {
	for _, opt := range []Options{{}, {NoCgroup: true}} {
		g, err := New(opt)
		if err != nil {
			t.Fatal(err)
		}
		if opt.NoCgroup {
			// Without a cgroup the watchdog reaches the process group
			// only: the shell's own child, not the one in a session of
			// its own (which the owner kills when it lives).
			cmd := exec.Command("/bin/sh", "-c", "sleep 300 & wait")
			cmd.SysProcAttr = &syscall.SysProcAttr{}
			g.Prepare(cmd.SysProcAttr)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			g.Started(cmd.Process.Pid)
			g.wdIn.Close() // as if the owner died
			g.wd.Wait()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Error("the watchdog did not kill the process group")
			}
			g.wdIn = nil
			g.Close()
			continue
		}
		pids := family(t, g)
		g.wdIn.Close()
		g.wd.Wait()
		checkGone(t, pids)
		g.wdIn = nil
		g.Close()
	}
}

// TestEscape: a root target that moves itself into the root cgroup, and
// starts a child that does the same in a session of its own, then exits:
// Close still ends both (the target by its pid, the child as an orphan
// that came to the subreaper), and so does the watchdog for the target.
func TestEscape(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: moving a process between cgroups needs root")
	}
	mnt, err := cgroup2Mount()
	if err != nil {
		t.Skipf("skipped: %v", err)
	}
	g, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Cgroup() == "" {
		g.Close()
		t.Skip("skipped: no cgroup on this machine")
	}
	root := filepath.Join(mnt, "cgroup.procs")
	pids := filepath.Join(t.TempDir(), "pids")
	// The target: into the root cgroup, a child that leaves its session
	// and the cgroup too, then it sleeps.
	script := `echo $$ > "$1"
setsid sh -c 'echo $$ > "$1"; echo $$ >> "$2"; exec sleep 300' child "$1" "$2" &
sleep 0.3
echo $$ >> "$2"
exec sleep 300`
	cmd := exec.Command("/bin/sh", "-c", script, "target", root, pids)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	g.Prepare(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.Started(cmd.Process.Pid)
	go cmd.Wait()
	out := readPids(pids, 2)
	if len(out) != 2 {
		t.Fatalf("the target and its child did not start: %v", out)
	}
	for _, pid := range out {
		if g.inCgroup(pid) {
			t.Fatalf("pid %d is still in the group's cgroup: the escape did not happen", pid)
		}
	}
	g.Close()
	checkGone(t, out)
}
