package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/proc"
)

func startAgent(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go serve(ln)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func call(t *testing.T, c net.Conn, r *bufio.Reader, line string) wire.Response {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	b, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var resp wire.Response
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

var sink []byte

func TestProtocol(t *testing.T) {
	c, r := startAgent(t)
	if h := call(t, c, r, `{"cmd":"hello"}`); h.PID != os.Getpid() || h.GOMAXPROCS <= 0 || h.GoVersion == "" {
		t.Errorf("hello = %+v", h)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"cmd":"end"}`, "no window open"},
		{`{"cmd":"jump"}`, `unknown command "jump"`},
		{`not json`, "bad request"},
	} {
		if got := call(t, c, r, tc.line); got.Error == "" || !strings.Contains(got.Error, tc.want) {
			t.Errorf("%s: error %q, want %q", tc.line, got.Error, tc.want)
		}
	}
	dir := t.TempDir()
	heap := filepath.Join(dir, "heap")
	beforeBegin := ownCPU()
	b := call(t, c, r, `{"cmd":"begin","heap_profile":"`+heap+`","cpu_profile":"`+filepath.Join(dir, "cpu")+`"}`)
	afterBegin := ownCPU()
	if b.Error != "" || b.Metrics == nil {
		t.Fatalf("begin = %+v", b)
	}
	if again := call(t, c, r, `{"cmd":"begin"}`); again.Error != "window already open" {
		t.Errorf("second begin: %q", again.Error)
	}
	for i := 0; i < 1000; i++ {
		sink = make([]byte, 64)
	}
	for start := ownCPU(); ownCPU() < start+20e6; {
	}
	beforeEnd := ownCPU()
	e := call(t, c, r, `{"cmd":"end"}`)
	afterEnd := ownCPU()
	if e.Error != "" || e.Metrics == nil {
		t.Fatalf("end = %+v", e)
	}
	// runtime/metrics is the oracle for the counters: at least the 1000
	// allocations made in the window.
	if d := e.Metrics.AllocObjects - b.Metrics.AllocObjects; d < 1000 {
		t.Errorf("metrics saw %d allocations in the window, want >= 1000", d)
	}
	// The CPU time is this process's getrusage, read by the agent between
	// the test's own readings around the call.
	if got := e.Metrics.CPUNanos; got < beforeEnd || got > afterEnd || b.Metrics.CPUNanos < beforeBegin || b.Metrics.CPUNanos > afterBegin {
		t.Errorf("agent CPU at begin %d (test read %d..%d), at end %d (test read %d..%d)", b.Metrics.CPUNanos, beforeBegin, afterBegin, got, beforeEnd, afterEnd)
	}
	for _, f := range []string{heap, heap + ".end", filepath.Join(dir, "cpu")} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// ownCPU is this process's CPU time, user and system, in nanoseconds.
func ownCPU() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return uint64(ru.Utime.Nano() + ru.Stime.Nano())
}

type fakeCounter struct{ began, ended int }

func (f *fakeCounter) Begin() error { f.began++; return nil }
func (f *fakeCounter) End(path string) error {
	f.ended++
	return os.WriteFile(path, []byte("{}"), 0o644)
}

func TestCounters(t *testing.T) {
	fc := &fakeCounter{}
	RegisterCounter("fake", fc)
	defer delete(counters, "fake")
	c, r := startAgent(t)
	if h := call(t, c, r, `{"cmd":"hello"}`); len(h.Counters) != 1 || h.Counters[0] != "fake" {
		t.Errorf("hello counters = %v", h.Counters)
	}
	if resp := call(t, c, r, `{"cmd":"begin","counters":{"nosuch":"/x"}}`); !strings.Contains(resp.Error, `counter "nosuch" is not built into this binary`) {
		t.Errorf("unknown counter: %q", resp.Error)
	}
	out := filepath.Join(t.TempDir(), "fake.json")
	if resp := call(t, c, r, `{"cmd":"begin","counters":{"fake":"`+out+`"}}`); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if resp := call(t, c, r, `{"cmd":"end"}`); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if fc.began != 1 || fc.ended != 1 {
		t.Errorf("began %d ended %d", fc.began, fc.ended)
	}
	if _, err := os.Stat(out); err != nil {
		t.Error(err)
	}
}

func TestSymbolize(t *testing.T) {
	pcs := make([]uintptr, 4)
	n := runtime.Callers(1, pcs)
	fr := Symbolize(pcs[:n])
	if len(fr) == 0 || len(fr[0].Frames) == 0 || fr[0].Frames[0].Func != "github.com/perfspy/perfspy/agent.TestSymbolize" {
		t.Errorf("Symbolize = %+v", fr)
	}
}

// TestListeners: the agent's listening sockets are the ones the net
// package opened to listen (its Addr is the oracle); connected sockets,
// a client's UDP socket and the unix socket are not.
func TestListeners(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	uc, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	got := listeners()
	want := map[string]bool{"tcp " + ln.Addr().String(): true, "udp " + pc.LocalAddr().String(): true}
	for _, l := range got {
		for _, not := range []net.Addr{client.LocalAddr(), uc.LocalAddr()} {
			if strings.HasSuffix(l, " "+not.String()) {
				t.Errorf("%s is a connected socket, not a listener", l)
			}
		}
		delete(want, l)
	}
	if len(want) > 0 {
		t.Errorf("listeners %v lack %v", got, want)
	}
	// On Linux, the kernel's /proc/net tables (the readiness check's own
	// source there) list the same listening ports of this process.
	if runtime.GOOS == "linux" {
		byPID, err := proc.Listeners([]int{os.Getpid()})
		if err != nil {
			t.Fatal(err)
		}
		kernel := map[string]bool{}
		for _, l := range byPID[os.Getpid()] {
			kernel[fmt.Sprintf("%v %d", l.UDP, l.Port)] = true
		}
		for _, s := range got {
			l, err := proc.ParseListener(s)
			if err != nil {
				t.Fatal(err)
			}
			if !kernel[fmt.Sprintf("%v %d", l.UDP, l.Port)] {
				t.Errorf("%s: not a listener in /proc/net (%v)", s, byPID)
			}
		}
		if len(kernel) != len(got) {
			t.Errorf("/proc/net has %d listening ports of this process, the agent %d: %v", len(kernel), len(got), got)
		}
	}
}
