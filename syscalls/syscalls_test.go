package syscalls

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfspy/perfspy/internal/elfsym"
	"github.com/perfspy/perfspy/internal/testtarget"
	"github.com/perfspy/perfspy/load"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testtarget.RequireRoot(t, "counting syscalls with eBPF")
}

func TestNames(t *testing.T) {
	for n, want := range map[int]string{0: "read", 1: "write", 39: "getpid", 110: "getppid", 232: "epoll_wait", 281: "epoll_pwait", 202: "futex", 99999: "syscall_99999"} {
		if got := Name(n); got != want {
			t.Errorf("Name(%d) = %q, want %q", n, got, want)
		}
	}
}

// straceCounts parses the table of strace -c.
func straceCounts(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// % time, seconds, usecs/call, calls, [errors,] syscall
		if len(f) < 5 {
			continue
		}
		calls, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			continue
		}
		out[f[len(f)-1]] = calls
	}
	return out
}

// TestCountsMatchStrace: getppid once per request, and one extra write per
// request, counted by the BPF counter and by strace -c -f at once, must
// match each other and the requests exactly; both sit under the handler.
func TestCountsMatchStrace(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("starts a server and strace; skipped with -short")
	}
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("skipped: strace is not installed (apt-get install strace)")
	}
	// No preemption signals: a write interrupted and restarted enters the
	// kernel twice (the BPF counter sees both), strace reports it once.
	cmd, addr := testtarget.Start(t, []string{"GODEBUG=asyncpreemptoff=1"})
	pid := cmd.Process.Pid
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	sym, err := elfsym.Open(exe, pid)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	straceOut := filepath.Join(t.TempDir(), "strace.txt")
	st := startStrace(t, pid, straceOut)

	if err := c.SetStacks(true); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Counts()
	sbefore, _ := c.StackCounts()
	var total, writes uint64
	for _, path := range []string{"/getppid", "/write"} {
		drv, _ := load.NewHTTP(load.HTTPOptions{URL: "http://" + addr + path, Conns: 2})
		res, err := drv.Run(context.Background(), 500*time.Millisecond)
		drv.Close()
		if err != nil || res.Errors+res.Non2xx != 0 {
			t.Fatalf("load %s: %v %+v", path, err, res)
		}
		total += uint64(res.OK)
		if path == "/write" {
			writes = uint64(res.OK)
		}
		if path == "/getppid" {
			after, _ := c.Counts()
			d := Delta(before, after)
			t.Logf("getppid: bpf %d for %d requests", d[110], res.OK)
			if d[110] != uint64(res.OK) {
				t.Errorf("getppid: bpf counted %d for %d requests", d[110], res.OK)
			}
		}
	}
	after, _ := c.Counts()
	safter, _ := c.StackCounts()
	// strace counts a call when it returns, the BPF counter when it
	// enters: a runtime write (the netpoller's wake-up) stopped at entry
	// when strace detaches is counted by BPF alone, at most one per
	// thread, and one entered after the counter was read is counted by
	// strace alone. So strace's count lies between the counter read
	// before it stops less the threads, and the counter read after.
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	threads := uint64(len(tasks))
	st.Process.Signal(syscall.SIGINT)
	st.Wait()
	late, _ := c.Counts()
	sc2 := straceCounts(t, straceOut)
	d := Delta(before, after)
	dl := Delta(before, late)
	t.Logf("bpf: getppid %d; strace: getppid %d, write %d (bpf %d..%d); requests %d", d[110], sc2["getppid"], sc2["write"], d[1], dl[1], total)
	if sc2["getppid"] != d[110] {
		t.Errorf("getppid: strace %d, bpf %d", sc2["getppid"], d[110])
	}
	if sc2["write"]+threads < d[1] || sc2["write"] > dl[1] {
		t.Errorf("write: strace %d, bpf %d before strace stopped and %d after (%d threads)", sc2["write"], d[1], dl[1], threads)
	}
	checkUnderMain(t, c.Sites(sbefore, safter, sym), d[110], writes)
	if err := Profile(c.Sites(sbefore, safter, sym)).CheckValid(); err != nil {
		t.Error(err)
	}
}

// startStrace attaches strace -c to pid's getppid and write calls, and
// returns once strace says it has attached to every thread.
func startStrace(t *testing.T, pid int, out string) *exec.Cmd {
	t.Helper()
	st := exec.Command("strace", "-c", "-f", "-e", "trace=getppid,write", "-o", out, "-p", strconv.Itoa(pid))
	stErr, _ := st.StderrPipe()
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stErr)
	deadline := time.Now().Add(10 * time.Second)
	for sc.Scan() && time.Now().Before(deadline) {
		if strings.Contains(sc.Text(), "attached") && strings.Contains(sc.Text(), "thread") || strings.Contains(sc.Text(), "Process "+strconv.Itoa(pid)+" attached") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	time.Sleep(300 * time.Millisecond)
	return st
}

// checkUnderMain: per stack, every getppid, and one write per /write
// request, under the handler's closure in package main.
func checkUnderMain(t *testing.T, sites []Site, getppid, writes uint64) {
	t.Helper()
	underMain := map[string]uint64{}
	for _, s := range sites {
		for _, pf := range s.Stack {
			if len(pf.Frames) > 0 && strings.HasPrefix(pf.Frames[0].Func, "main.main.func") {
				underMain[s.Name] += s.Count
				break
			}
		}
	}
	if underMain["getppid"] != getppid {
		t.Errorf("getppid under main's handlers: %d of %d", underMain["getppid"], getppid)
	}
	t.Logf("under main's handlers: getppid %d, write %d (/write requests %d)", underMain["getppid"], underMain["write"], writes)
	if underMain["write"] != writes {
		t.Errorf("write under main's handlers: %d, want one per /write request: %d", underMain["write"], writes)
	}
}
