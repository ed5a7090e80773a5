// Package contain keeps a target and every process it starts together, so
// that all of them end with probe however probe ends (docs/security.md):
//
//   - where the machine allows it (cgroup v2 writable, as root in CI), the
//     target starts inside a cgroup of its own (clone into the cgroup, so
//     that not one instruction runs outside it), and cgroup.kill ends it
//     and every descendant, a daemon that started a session of its own
//     included;
//   - elsewhere the target leads a process group;
//   - either way probe is a child subreaper: descendants orphaned on the
//     way are reparented to probe and killed with the group, and so is
//     the target itself by its pid, however it left: a root target that
//     moved itself, or a child, out of the cgroup (into the root cgroup)
//     and into a session of its own is still probe's descendant;
//   - a watchdog (a shell of its own process group, holding a pipe from
//     probe) kills the cgroup or the group when the pipe closes without
//     the word "done": probe killed by SIGKILL or crashed.
package contain

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// own holds the pids of every open group's target and watchdog, and of
// the commands probe starts in a process group of their own (Keep): one
// group's search for orphans never takes another's, nor a go build.
var own sync.Map // pid -> *Group (nil for Keep's)

// starting is held from a start of a process probe owns until its pid is
// in own, and by the search for orphans: a process another goroutine had
// just started (two benchmarks counted side by side under callgrind) was
// otherwise an orphan of the group that looked then, and killed.
var starting sync.Mutex

// Starting holds off the search for orphans while the caller starts a
// process and records it (Group.Started, Keep); it returns the release.
func Starting() (done func()) {
	starting.Lock()
	return starting.Unlock
}

// Keep says that pid is a child probe started in a process group of its
// own while a target may run (the go command): never an orphan of a
// group. The returned function forgets it, once it was waited for.
func Keep(pid int) (forget func()) {
	own.Store(pid, (*Group)(nil))
	return func() { own.Delete(pid) }
}

// Group is where one target and what it starts are kept.
type Group struct {
	cgroup string // the cgroup's folder, "" when none
	fd     int    // its descriptor, for clone
	pgid   int
	wd     *exec.Cmd
	wdIn   *os.File
}

// Options choose how a group holds its processes; the zero value is
// the best the machine allows.
type Options struct {
	// NoCgroup keeps the group a process group (with probe as the
	// subreaper) even where a cgroup could be made.
	NoCgroup bool
	// Private is the run's private folder (its agent socket, its
	// reports), which the watchdog removes when probe dies: probe cannot
	// after SIGKILL. Only an absolute path whose name starts with
	// "perfspy-" is taken.
	Private string
}

// New makes a group: a cgroup when one can be made, and the watchdog.
func New(opt Options) (*Group, error) {
	g := &Group{fd: -1}
	if dir, err := makeCgroup(); err == nil && !opt.NoCgroup {
		fd, err := openCgroupDir(dir)
		if err == nil {
			g.cgroup, g.fd = dir, fd
		} else {
			os.Remove(dir)
		}
	}
	// Orphans come to probe (not init), to be killed with the group:
	// without a cgroup, every one; with one, those that left it
	// (cgroup.kill reaches the others wherever they are).
	becomeSubreaper()
	private := opt.Private
	if !filepath.IsAbs(private) || !strings.HasPrefix(filepath.Base(private), "perfspy-") {
		private = ""
	}
	if err := g.startWatchdog(private); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// Cgroup is the group's cgroup folder, "" when the machine gave none.
func (g *Group) Cgroup() string { return g.cgroup }

// Prepare makes a command start in the group: its own process group, the
// cgroup when there is one, and SIGKILL when probe's thread dies.
func (g *Group) Prepare(attr *syscall.SysProcAttr) {
	attr.Setpgid = true
	prepareOS(attr, g.fd)
}

// NoCgroup takes the cgroup out of the group, when starting in it failed
// (an old kernel without clone into a cgroup): the group falls back to the
// process group.
func (g *Group) NoCgroup() {
	if g.fd >= 0 {
		syscall.Close(g.fd)
		os.Remove(g.cgroup)
		g.fd, g.cgroup = -1, ""
	}
}

// Started tells the group the target's pid (its process group).
func (g *Group) Started(pid int) {
	g.pgid = pid
	own.Store(pid, g)
	fmt.Fprintf(g.wdIn, "%d\n", pid)
}

// Kill ends every process of the group and waits (up to 5 s) until none
// is left.
func (g *Group) Kill() {
	if g.cgroup != "" {
		os.WriteFile(filepath.Join(g.cgroup, "cgroup.kill"), []byte("1"), 0)
	}
	if g.pgid > 0 {
		_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
		// The target itself, when it left its process group (a
		// session of its own) and the cgroup: still probe's child.
		if g.targetRunning() {
			_ = syscall.Kill(g.pgid, syscall.SIGKILL)
		}
	}
	g.killOrphans()
	for i := 0; i < 500 && g.alive(); i++ {
		time.Sleep(10 * time.Millisecond)
		g.killOrphans()
	}
}

// alive tells whether a process of the group is left.
func (g *Group) alive() bool {
	if g.cgroup != "" {
		b, _ := os.ReadFile(filepath.Join(g.cgroup, "cgroup.procs"))
		if len(strings.TrimSpace(string(b))) > 0 {
			return true
		}
	}
	return g.pgid > 0 && (syscall.Kill(-g.pgid, 0) == nil || g.targetRunning()) || len(g.orphans(false)) > 0
}

// targetRunning tells whether the target still runs as probe's child
// (not reaped, not a zombie): its pid is not another process's.
func (g *Group) targetRunning() bool {
	ppid, err := statField(g.pgid, 4)
	return err == nil && ppid == os.Getpid() && Running(g.pgid)
}

// killOrphans kills the group's orphans (orphans) and reaps them.
func (g *Group) killOrphans() {
	for _, pid := range g.orphans(true) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// orphans are probe's children that probe did not start with exec:
// descendants of the target whose parent died, reparented to probe, the
// subreaper, whether or not they left the cgroup. Another open group's
// target and watchdog are not; a zombie is when zombies is set (to be
// reaped: a zombie keeps its process group alive).
func (g *Group) orphans(zombies bool) []int {
	if g.pgid <= 0 {
		return nil
	}
	starting.Lock()
	defer starting.Unlock()
	var out []int
	for _, pid := range childrenOf(os.Getpid()) {
		if pid == g.pgid || (g.wd != nil && g.wd.Process != nil && pid == g.wd.Process.Pid) || !zombies && !Running(pid) {
			continue
		}
		if o, ok := own.Load(pid); ok && o != g {
			continue
		}
		// probe's own children stay in its process group, or are older
		// than the target; an orphan of the target left it, later.
		if pgid, err := syscall.Getpgid(pid); err == nil && !g.inCgroup(pid) && (pgid == syscall.Getpgrp() || startedBefore(pid, g.pgid)) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

func (g *Group) inCgroup(pid int) bool {
	if g.cgroup == "" {
		return false
	}
	b, _ := os.ReadFile(filepath.Join(g.cgroup, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if f == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

// Close kills what is left, removes the cgroup and lets the watchdog go.
func (g *Group) Close() {
	g.Kill()
	if g.pgid > 0 {
		own.CompareAndDelete(g.pgid, g)
	}
	if g.wd != nil && g.wd.Process != nil {
		own.CompareAndDelete(g.wd.Process.Pid, g)
	}
	if g.wdIn != nil {
		fmt.Fprintln(g.wdIn, "done")
		g.wdIn.Close()
		done := make(chan struct{})
		go func() { g.wd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			g.wd.Process.Kill()
		}
		g.wdIn = nil
	}
	if g.fd >= 0 {
		syscall.Close(g.fd)
		g.fd = -1
	}
	if g.cgroup != "" {
		for i := 0; i < 100; i++ {
			if err := os.Remove(g.cgroup); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// watchdogScript reads the target's process group, then waits: "done"
// lets it go; anything else (the pipe closed: probe died) kills the
// cgroup, when there is one, and the process group, and removes the
// run's private folder.
const watchdogScript = `read pgid
read word
[ "$word" = done ] && exit 0
[ -n "$1" ] && echo 1 > "$1/cgroup.kill"
[ -n "$pgid" ] && kill -KILL "-$pgid" 2>/dev/null
[ -n "$pgid" ] && kill -KILL "$pgid" 2>/dev/null
[ -n "$2" ] && rm -rf -- "$2"
[ -n "$1" ] && for i in 1 2 3 4 5 6 7 8 9 10; do rmdir "$1" 2>/dev/null && break; sleep 0.2; done
exit 0
`

func (g *Group) startWatchdog(private string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "perfspy-watchdog", g.cgroup, private)
	cmd.Stdin = r
	// A process group of its own: the terminal's Ctrl-C does not end it
	// before probe has cleaned up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	done := Starting()
	defer done()
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("starting the watchdog: %w", err)
	}
	r.Close()
	g.wd, g.wdIn = cmd, w
	own.Store(cmd.Process.Pid, g)
	return nil
}

// makeCgroup makes a cgroup v2 folder beside probe's own cgroup (a child
// of it), when the unified hierarchy is mounted and writable.
func makeCgroup() (string, error) {
	mnt, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var own string
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return "", errors.New("no cgroup v2 membership")
	}
	dir := filepath.Join(mnt, filepath.FromSlash(own), fmt.Sprintf("perfspy-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		os.Remove(dir)
		return "", errors.New("no cgroup.kill (kernel before 5.14)")
	}
	return dir, nil
}

// cgroup2Mount finds where the unified hierarchy is mounted.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if pf, qf := strings.Fields(pre), strings.Fields(post); len(pf) > 4 && len(qf) > 0 && qf[0] == "cgroup2" {
			return pf[4], nil
		}
	}
	return "", errors.New("no cgroup2 mount")
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := statField(n, 4); ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// startedBefore tells whether pid started before other (start times
// from /proc/PID/stat, in clock ticks since boot).
func startedBefore(pid, other int) bool {
	a, err1 := statField(pid, 22)
	b, err2 := statField(other, 22)
	return err1 == nil && err2 == nil && a < b
}

// statField reads field n (1-based, as proc(5) numbers them) of
// /proc/PID/stat.
func statField(pid, n int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(s[i+1:])
	if n-3 >= len(f) || n < 3 {
		return 0, errors.New("bad stat")
	}
	return strconv.Atoi(f[n-3])
}
