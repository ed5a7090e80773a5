// Package proc is the plumbing of a target's process: starting it (in a
// group that ends with probe, internal/contain), waiting until it listens
// and telling which socket is its, reading its CPU time, run-queue wait,
// I/O and affinity from /proc, and the -cpus plan.
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/perfspy/perfspy/internal/contain"
	"github.com/perfspy/perfspy/internal/safetext"
)

// Proc is a running target, leader of its own process group.
type Proc struct {
	cmd     *exec.Cmd
	group   *contain.Group // the target and all it starts
	Pid     int
	done    chan struct{}
	waitErr error
	logPath string
	Grace   time.Duration // between SIGTERM and SIGKILL; default 2s
}

// Start starts bin in a new process group. When cpus is not empty the
// child starts pinned to them: it inherits the affinity of the thread that
// forks it, so that thread is pinned for the moment of the fork.
func Start(bin string, args, env []string, logPath string, cpus []int) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	return StartCmd(cmd, logPath, cpus)
}

// StartCmd starts cmd as Start does, its output to logPath.
func StartCmd(cmd *exec.Cmd, logPath string, cpus []int) (*Proc, error) {
	return StartRun(cmd, logPath, cpus, "")
}

// StartRun is StartCmd for a run whose private folder (perfspy-...) the
// watchdog removes if probe dies without cleaning up.
func StartRun(cmd *exec.Cmd, logPath string, cpus []int, private string) (*Proc, error) {
	bin := cmd.Path
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout = logf
	cmd.Stderr = logf
	group, err := contain.New(contain.Options{Private: private})
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	group.Prepare(cmd.SysProcAttr)
	if len(cpus) > 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		restore, err := pinThread(cpus)
		if err != nil {
			return nil, fmt.Errorf("pinning target to cpus %v: %w", cpus, err)
		}
		defer restore()
	}
	// Recorded as the group's before another group looks for orphans.
	started := contain.Starting()
	err = cmd.Start()
	if err != nil && group.Cgroup() != "" && cmd.Process == nil {
		// A kernel without clone into a cgroup: the process group.
		group.NoCgroup()
		retry := exec.Command(cmd.Path, cmd.Args[1:]...)
		retry.Env, retry.Dir, retry.Stdin, retry.Stdout, retry.Stderr, retry.ExtraFiles = cmd.Env, cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.ExtraFiles
		retry.SysProcAttr = cmd.SysProcAttr
		contain.NoCgroupFD(retry.SysProcAttr)
		cmd = retry
		err = cmd.Start()
	}
	if err != nil {
		started()
		group.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	group.Started(cmd.Process.Pid)
	started()
	p := &Proc{cmd: cmd, group: group, Pid: cmd.Process.Pid, done: make(chan struct{}), logPath: logPath}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the leader has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitStatus describes how the leader ended, with the tail of its output.
func (p *Proc) ExitStatus() string {
	msg := "exited"
	if p.waitErr != nil {
		msg = p.waitErr.Error()
	}
	return msg + p.logTail()
}

func (p *Proc) logTail() string {
	lines := crashLines(p.logPath)
	if len(lines) == 0 {
		return ""
	}
	// Quoted: a line of the target's never begins a line of ours (a CI
	// runner's workflow commands).
	return "; its last output:\n  " + strings.ReplaceAll(safetext.Relayed(strings.Join(lines, "\n")), "\n", "\n  ")
}

// Bounds of what logTail shows: a target's output is not the user's
// terminal's to fill (a 100 MB line without a newline).
const (
	tailLines    = 10
	tailLineMax  = 300
	tailReadMax  = 64 << 10
	crashContext = 14 // lines from "panic:" or "fatal error:" on: the message and its goroutine
)

// crashLines is what says why a target ended: from the last line that
// starts a Go crash report ("panic: ", "fatal error: ") on, or else the
// last lines; each line cut to tailLineMax bytes and made safe.
func crashLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var crash []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	sc.Split(cutLines)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: "):
			crash = []string{line}
		case crash != nil && len(crash) < crashContext:
			crash = append(crash, line)
		}
	}
	if crash != nil {
		return clip(crash)
	}
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(st.Size()-tailReadMax, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // cut in the middle
	}
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return clip(lines)
}

// cutLines is bufio.ScanLines that cuts a line longer than the buffer
// instead of failing.
func cutLines(data []byte, atEOF bool) (int, []byte, error) {
	adv, tok, err := bufio.ScanLines(data, atEOF)
	if adv == 0 && tok == nil && len(data) == 64<<10 {
		return len(data), data, nil
	}
	return adv, tok, err
}

func clip(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > tailLineMax {
			l = l[:tailLineMax] + fmt.Sprintf("... (%d bytes more)", len(l)-tailLineMax)
		}
		out[i] = safetext.Text(l)
	}
	return out
}

// Stop ends the whole process group: SIGTERM, then SIGKILL after a grace
// period. It is safe to call more than once.
func (p *Proc) Stop() {
	_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	grace := p.Grace
	if grace == 0 {
		grace = 2 * time.Second
	}
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	// Children may outlive the leader; the group is killed either way,
	// with what left it (a cgroup, or orphans reparented to probe).
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	<-p.done
	p.group.Close()
	for i := 0; i < 100 && len(GroupPIDs(p.Pid)) > 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// ErrNotReady is returned when the target never listened in time.
var ErrNotReady = errors.New("target did not become ready")

// ErrExitedEarly is a target that exited before it listened.
var ErrExitedEarly = errors.New("target exited before it listened")

// Endpoint is where the target listens.
type Endpoint struct {
	Addr string
	UDP  bool // a UDP socket: a QUIC or plain-UDP target
}

// AskListeners asks the target itself (its agent) for its listening
// sockets, where /proc cannot tell (ProcNet false).
type AskListeners func() ([]Listener, error)

// ProcNet says whether /proc tells a process's sockets (Linux).
const ProcNet = runtime.GOOS == "linux"

// WaitReady waits until the target's process group listens on exactly one
// TCP or UDP address (or on addr, when given) and its agent socket exists.
// It refuses a port that another process holds or that several processes
// listen on. Without /proc (ProcNet), ask gives the target's own sockets,
// and who else holds a port is not known.
func WaitReady(ctx context.Context, p *Proc, addr, sock string, timeout time.Duration, ask AskListeners) (Endpoint, error) {
	wantPort := 0
	if addr != "" {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return Endpoint{}, fmt.Errorf("-addr %q: %w", addr, err)
		}
		if wantPort, err = strconv.Atoi(port); err != nil || wantPort <= 0 {
			return Endpoint{}, fmt.Errorf("-addr %q: bad port", addr)
		}
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.Exited() {
			return Endpoint{}, fmt.Errorf("%w: %s", ErrExitedEarly, p.ExitStatus())
		}
		got, err := readyAddr(p.Pid, addr, wantPort, sock)
		if !ProcNet {
			got, err = readyAsked(ask, addr, wantPort, sock)
		}
		if err != nil || got.Addr != "" {
			return got, err
		}
		if time.Now().After(deadline) {
			what := "listened on a TCP or UDP port"
			if addr != "" {
				what = "listened on " + addr + openPorts(p.Pid)
			}
			return Endpoint{}, fmt.Errorf("%w: it never %s within %v (raise -ready-timeout)%s", ErrNotReady, what, timeout, p.logTail())
		}
		select {
		case <-ctx.Done():
			return Endpoint{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// readyAddr checks once; "" with a nil error means not ready yet.
func readyAddr(pgid int, addr string, wantPort int, sock string) (Endpoint, error) {
	if _, err := os.Stat(sock); err != nil {
		return Endpoint{}, nil
	}
	pids := GroupPIDs(pgid)
	byPID, err := Listeners(pids)
	if err != nil {
		return Endpoint{}, err
	}
	if wantPort != 0 {
		owners, err := PortOwners(wantPort, pgid)
		if err != nil {
			return Endpoint{}, err
		}
		if len(owners) == 0 {
			return Endpoint{}, nil
		}
		if err := CheckOwners(wantPort, owners, pids); err != nil {
			return Endpoint{}, err
		}
		udp := false
		for _, ls := range byPID {
			for _, l := range ls {
				udp = udp || l.Port == wantPort && l.UDP
			}
		}
		return Endpoint{Addr: addr, UDP: udp}, nil
	}
	type key struct {
		port int
		udp  bool
	}
	ports := map[key]Listener{}
	for _, ls := range byPID {
		for _, l := range ls {
			ports[key{l.Port, l.UDP}] = l
		}
	}
	switch len(ports) {
	case 0:
		return Endpoint{}, nil
	case 1:
	default:
		var list []string
		for _, l := range ports {
			a := l.Addr()
			if l.UDP {
				a = "udp " + a
			}
			list = append(list, a)
		}
		return Endpoint{}, &ListenersError{Addrs: sortedStrings(list)}
	}
	var l Listener
	for _, v := range ports {
		l = v
	}
	owners, err := PortOwners(l.Port, pgid)
	if err != nil {
		return Endpoint{}, err
	}
	if err := CheckOwners(l.Port, owners, pids); err != nil {
		return Endpoint{}, err
	}
	return Endpoint{Addr: LoopbackAddr(l), UDP: l.UDP}, nil
}

// readyAsked is readyAddr from the target's own answer.
func readyAsked(ask AskListeners, addr string, wantPort int, sock string) (Endpoint, error) {
	if _, err := os.Stat(sock); err != nil || ask == nil {
		return Endpoint{}, nil
	}
	ls, err := ask()
	if err != nil {
		return Endpoint{}, nil // the agent is not serving yet
	}
	type key struct {
		port int
		udp  bool
	}
	seen := map[key]bool{}
	var one []Listener
	for _, l := range ls {
		k := key{l.Port, l.UDP}
		if wantPort != 0 && l.Port == wantPort {
			return Endpoint{Addr: addr, UDP: l.UDP}, nil
		}
		if !seen[k] {
			seen[k] = true
			one = append(one, l)
		}
	}
	switch {
	case wantPort != 0 || len(one) == 0:
		return Endpoint{}, nil
	case len(one) > 1:
		var list []string
		for _, l := range one {
			list = append(list, l.Addr())
		}
		return Endpoint{}, &ListenersError{Addrs: sortedStrings(list)}
	}
	return Endpoint{Addr: one[0].Addr(), UDP: one[0].UDP}, nil
}

// ListenersError is a target that listens on several addresses when no
// -addr chose one. Advice, when set, says what will hold on the next run
// (the ports a server chose at its start change every run).
type ListenersError struct {
	Addrs  []string
	Advice string
}

func (e *ListenersError) Error() string {
	advice := e.Advice
	if advice == "" {
		advice = "choose one with -addr"
	}
	return fmt.Sprintf("target listens on %d addresses (%s); %s", len(e.Addrs), strings.Join(e.Addrs, ", "), advice)
}

// ParseListener reads an agent's "tcp HOST:PORT" or "udp HOST:PORT".
func ParseListener(s string) (Listener, error) {
	proto, hp, ok := strings.Cut(s, " ")
	host, port, err := net.SplitHostPort(hp)
	if !ok || err != nil || (proto != "tcp" && proto != "udp") {
		return Listener{}, fmt.Errorf("bad listener %q", s)
	}
	n, err := strconv.Atoi(port)
	ip := net.ParseIP(host)
	if err != nil || n <= 0 || n > 65535 || ip == nil {
		return Listener{}, fmt.Errorf("bad listener %q", s)
	}
	return Listener{IP: ip, Port: n, UDP: proto == "udp"}, nil
}

// LoopbackAddr is where the load goes for listener l. A TCP socket on
// [::] (Go's ":port") is usually dual-stack: when 127.0.0.1 answers on
// its port, the load goes there, the address that users' certificates
// and firewall rules name, rather than to [::1]. Its owner is the target:
// CheckOwners refused any other.
func LoopbackAddr(l Listener) string {
	if !l.UDP && l.IP.IsUnspecified() && l.IP.To4() == nil {
		a := net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port))
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			return a
		}
	}
	return l.Addr()
}

// CheckOwners refuses a port held by a process outside the target's group,
// or by more than one process: either way the load would not measure the target alone.
func CheckOwners(port int, owners, group []int) error {
	in := map[int]bool{}
	for _, g := range group {
		in[g] = true
	}
	var outside []string
	for _, o := range owners {
		if !in[o] {
			outside = append(outside, strconv.Itoa(o))
		}
	}
	if len(outside) > 0 {
		return fmt.Errorf("port %d is held by another process (pid %s), not by the target (pids %s); refusing to measure", port, strings.Join(outside, ", "), joinInts(group))
	}
	if len(owners) > 1 {
		return fmt.Errorf("port %d has %d listening processes (pids %s); refusing to measure, the load would be split", port, len(owners), joinInts(owners))
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// openPorts names what the target listens on instead, for an -addr it
// never opened.
func openPorts(pgid int) string {
	byPID, err := Listeners(GroupPIDs(pgid))
	if err != nil {
		return ""
	}
	var list []string
	for _, ls := range byPID {
		for _, l := range ls {
			a := l.Addr()
			if l.UDP {
				a = "udp " + a
			}
			list = append(list, a)
		}
	}
	if len(list) == 0 {
		return " (it listens on no port)"
	}
	return " (it listens on " + strings.Join(sortedStrings(list), ", ") + ": pass that to -addr, or leave -addr out)"
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// WaitErr is how the process ended, once Done is closed.
func (p *Proc) WaitErr() error { return p.waitErr }

// FreePort is a TCP port of 127.0.0.1 nothing listens on as it returns
// (another process may take it after: the caller uses it at once).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
