// Package agent is the in-process side of probe. probe adds one file to the
// target's package main that imports this package; its init starts a control
// server on the Unix socket named by the environment variable wire.SocketEnv, and
// does nothing when the variable is unset.
//
// The agent uses the standard library only, so that a target of another
// module needs no new requirements beyond this module itself.
//
// Protocol (package wire): one JSON Request per line, one JSON Response per line.
//
//	{"cmd":"hello"}   process facts and the counters built in
//	{"cmd":"listeners"}   the process's listening sockets (where probe
//	                  cannot read them from /proc: macOS)
//	{"cmd":"begin", "heap_profile":P, "cpu_profile":C, "trace":T,
//	 "blocking":B, "counters":{"allocs":A, "copies":K}}   snapshot 1
//	{"cmd":"prepare", "retained":R}  the heap profile at rate 1 from now
//	                  (before the retained window's warm-up)
//	{"cmd":"begin", "retained":R}   the heap in use (rate 1) and goroutines;
//	                  end writes R+".json" (wire.RetainedReport) and the
//	                  goroutines at R+".goroutines" and R+".goroutines.end"
//	{"cmd":"end"}     snapshot 2: profiles, trace and reports written
//
// begin with heap_profile set makes the heap profile exact for the window:
// it sets runtime.MemProfileRate=1, runs runtime.GC() so the profile is
// published, and writes the allocation profile to P. end runs runtime.GC()
// again, writes the profile to P+".end" and restores the rate. The window is
// the difference of the two files; probe computes it and drops samples whose
// stack passes through this package, so the agent's own allocations never
// count. cpu_profile and trace record into memory and are written to C and
// T at end, so that no write of theirs falls in the window. Counters
// (copyspy, allocspy, the wall-clock profiler) never count the agent's
// own goroutine.
package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/perfspy/perfspy/agent/wire"
)

// Counter counts events per call site in a window. The readers of the
// runtime overlays (agent/copytable, agent/alloctable) register one when the
// target is built with their overlay.
type Counter interface {
	// Begin snapshots the counts and starts counting.
	Begin() error
	// End stops counting and writes the window's report to path.
	End(path string) error
}

var counters = map[string]Counter{}

var billEvery atomic.Int64

// BillEvery is the window's wire.Request.BillEvery, at least 1: the bills
// counter reads it as it begins.
func BillEvery() int { return int(billEvery.Load()) }

// RegisterCounter installs a counter under name. It is called from an init.
func RegisterCounter(name string, c Counter) { counters[name] = c }

func counterNames() []string {
	var n []string
	for k := range counters {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func init() {
	path := os.Getenv(wire.SocketEnv)
	if path == "" {
		return
	}
	// Children of the target must not try to serve the same socket.
	os.Unsetenv(wire.SocketEnv)
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "perfspy agent: %v\n", err)
		return
	}
	go serve(ln)
}

func serve(ln net.Listener) {
	var w window
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		handleConn(c, &w)
	}
}

func handleConn(c net.Conn, w *window) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req wire.Request
		var resp wire.Response
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp.Error = fmt.Sprintf("bad request: %v", err)
		} else {
			resp = w.do(req)
		}
		if err := enc.Encode(resp); err != nil {
			return
		}
	}
}

// window holds the state between begin and end.
type window struct {
	mu         sync.Mutex
	open       bool
	heapPath   string
	retained   string
	live       liveHeap // the heap in use at the retained window's begin
	prepared   bool     // MemProfileRate is 1 since prepare; oldRate is the one before
	oldRate    int
	cpu, trace recording
	active     []string          // counters counting, in the order they began
	paths      map[string]string // their report paths
	blocking   string
	oldMutex   int
}

// recording is the CPU profile or the execution trace of a window. It is
// kept in memory until the window ends: written to its file as it goes,
// its writes would be counted as the target's syscalls.
type recording struct {
	path string // "" when not recording
	buf  bytes.Buffer
}

func (r *recording) start(path string, start func(io.Writer) error) error {
	r.buf.Reset()
	if err := start(&r.buf); err != nil {
		return err
	}
	r.path = path
	return nil
}

// stop stops the recording and writes it to its file.
func (r *recording) stop(stop func()) error {
	if r.path == "" {
		return nil
	}
	stop()
	err := os.WriteFile(r.path, r.buf.Bytes(), 0o644)
	r.path = ""
	r.buf.Reset()
	return err
}

func (w *window) do(req wire.Request) wire.Response {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch req.Cmd {
	case "hello":
		return wire.Response{PID: os.Getpid(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), Counters: counterNames()}
	case "listeners":
		return wire.Response{Listeners: listeners(), AddrFlags: addrFlags()}
	case "prepare":
		// The warm-up then replaces what the requests before it keep
		// (a connection's last request) with objects the profile sees
		// at rate 1: the window's begin sees them, and their successors
		// are not taken for growth.
		if w.open || w.prepared || req.Retained == "" {
			return wire.Response{Error: "prepare: a retained window only, before its begin"}
		}
		w.prepared, w.oldRate = true, runtime.MemProfileRate
		runtime.MemProfileRate = 1
		return wire.Response{}
	case "begin":
		if w.open {
			return wire.Response{Error: "window already open"}
		}
		if err := w.begin(req); err != nil {
			return wire.Response{Error: err.Error()}
		}
		w.open = true
		return wire.Response{Metrics: readMetrics()}
	case "end":
		if !w.open {
			return wire.Response{Error: "no window open"}
		}
		w.open = false
		// Metrics first, so the agent's own work in end is not counted.
		m := readMetrics()
		if err := w.end(); err != nil {
			return wire.Response{Error: err.Error()}
		}
		return wire.Response{Metrics: m}
	}
	return wire.Response{Error: fmt.Sprintf("unknown command %q", req.Cmd)}
}

func (w *window) begin(req wire.Request) error {
	if req.Retained != "" {
		if req.HeapProfile != "" {
			return errors.New("retained and heap_profile want windows of their own")
		}
		if !w.prepared {
			w.oldRate = runtime.MemProfileRate
		}
		w.prepared = false
		runtime.MemProfileRate = 1
		w.retained = req.Retained
		if err := w.beginRetained(req.Retained); err != nil {
			runtime.MemProfileRate = w.oldRate
			w.retained = ""
			return err
		}
	}
	if req.HeapProfile != "" {
		if w.prepared {
			return errors.New("prepare is for a retained window")
		}
		w.oldRate = runtime.MemProfileRate
		runtime.MemProfileRate = 1
		w.heapPath = req.HeapProfile
		// The heap profile reflects allocations up to the last completed GC.
		runtime.GC()
		if err := writeProfile("allocs", req.HeapProfile); err != nil {
			runtime.MemProfileRate = w.oldRate
			return err
		}
	}
	if req.CPUProfile != "" {
		if err := w.cpu.start(req.CPUProfile, pprof.StartCPUProfile); err != nil {
			return fmt.Errorf("starting cpu profile: %w", err)
		}
	}
	if req.Blocking != "" {
		if err := writeProfiles(req.Blocking, ""); err != nil {
			w.abort()
			return err
		}
		runtime.SetBlockProfileRate(1)
		w.oldMutex = runtime.SetMutexProfileFraction(1)
		w.blocking = req.Blocking
	}
	if req.Trace != "" {
		if err := w.trace.start(req.Trace, trace.Start); err != nil {
			w.abort()
			return fmt.Errorf("starting the execution trace: %w", err)
		}
	}
	// Counters last, so the heap profile's GC is outside their window.
	billEvery.Store(1)
	if req.BillEvery > 1 {
		billEvery.Store(int64(req.BillEvery))
	}
	w.active, w.paths = nil, req.Counters
	names := make([]string, 0, len(req.Counters))
	for n := range req.Counters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := counters[n]
		if c == nil {
			w.abort()
			return fmt.Errorf("counter %q is not built into this binary (built in: %v)", n, counterNames())
		}
		if err := c.Begin(); err != nil {
			w.abort()
			return fmt.Errorf("%s: %w", n, err)
		}
		w.active = append(w.active, n)
	}
	return nil
}

// abort undoes a begin that failed half way.
func (w *window) abort() {
	for _, n := range w.active {
		counters[n].End(os.DevNull)
	}
	w.active = nil
	w.stopCPU()
	w.stopTrace()
	w.stopBlocking("")
	if w.heapPath != "" {
		runtime.MemProfileRate = w.oldRate
		w.heapPath = ""
	}
	if w.retained != "" {
		runtime.MemProfileRate = w.oldRate
		w.retained = ""
	}
}

func (w *window) stopCPU() error   { return w.cpu.stop(pprof.StopCPUProfile) }
func (w *window) stopTrace() error { return w.trace.stop(trace.Stop) }

func (w *window) end() error {
	var errs []error
	for i := len(w.active) - 1; i >= 0; i-- {
		n := w.active[i]
		if err := counters[n].End(w.paths[n]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
	}
	w.active = nil
	errs = append(errs, w.stopCPU(), w.stopTrace(), w.stopBlocking(".end"))
	if w.heapPath != "" {
		runtime.GC()
		errs = append(errs, writeProfile("allocs", w.heapPath+".end"))
		runtime.MemProfileRate = w.oldRate
		w.heapPath = ""
	}
	if w.retained != "" {
		errs = append(errs, w.endRetained(w.retained))
		runtime.MemProfileRate = w.oldRate
		w.retained = ""
	}
	return errors.Join(errs...)
}

// stopBlocking writes the block and mutex profiles with suffix (none when
// aborting) and restores the rates.
func (w *window) stopBlocking(suffix string) error {
	if w.blocking == "" {
		return nil
	}
	var err error
	if suffix != "" {
		err = writeProfiles(w.blocking, suffix)
	}
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(w.oldMutex)
	w.blocking = ""
	return err
}

// writeProfiles writes the block and mutex profiles to base+".block"+suffix
// and base+".mutex"+suffix.
func writeProfiles(base, suffix string) error {
	for _, name := range []string{"block", "mutex"} {
		if err := writeProfile(name, base+"."+name+suffix); err != nil {
			return err
		}
	}
	return nil
}

// writeProfile writes the named runtime/pprof profile to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("writing the %s profile: %w", name, err)
	}
	return f.Close()
}

// readMetrics reads the cumulative allocation counter (ReadMemStats first
// flushes the per-P caches, so the total is current), the process's CPU
// time and the goroutines created so far.
func readMetrics() *wire.Metrics {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	m := &wire.Metrics{}
	if s[0].Value.Kind() == metrics.KindUint64 {
		m.AllocObjects = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		n := s[1].Value.Uint64()
		m.GoroutinesCreated = &n
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		m.CPUNanos = uint64(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return m
}

// Symbolize expands return PCs into their frames, inlined ones included,
// innermost first, with runtime.CallersFrames. Counters call it on the PCs
// their runtime tables kept.
func Symbolize(pcs []uintptr) []wire.PCFrames {
	var out []wire.PCFrames
	for _, pc := range pcs {
		if pc == 0 {
			break
		}
		// The 0 after pc makes CallersFrames expand the frames inlined
		// around pc's call: with pc alone it stops at the innermost
		// (it expects the next PC of runtime.Callers' list to hold them).
		// PC 0 has no function and gives no frame.
		frames := runtime.CallersFrames([]uintptr{pc, 0})
		pf := wire.PCFrames{PC: uint64(pc)}
		for {
			f, more := frames.Next()
			if f.Function != "" {
				pf.Frames = append(pf.Frames, wire.Frame{Func: f.Function, File: f.File, Line: f.Line})
			}
			if !more {
				break
			}
		}
		out = append(out, pf)
	}
	return out
}
