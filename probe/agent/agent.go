// Package agent is the in-process side of probe. probe adds one file to the
// target's package main that imports this package; its init starts a control
// server on the Unix socket named by the environment variable SocketEnv, and
// does nothing when the variable is unset.
//
// The agent uses the standard library only, so that a target of another
// module needs no new requirements beyond this module itself.
//
// Protocol: one JSON Request per line, one JSON Response per line.
//
//	{"cmd":"hello"}                                    process facts
//	{"cmd":"begin","heap_profile":P,"cpu_profile":C}   snapshot 1
//	{"cmd":"end"}                                      snapshot 2
//
// begin with heap_profile set makes the heap profile exact for the window:
// it sets runtime.MemProfileRate=1, runs runtime.GC() so the profile is
// published, and writes the allocation profile to P. end runs runtime.GC()
// again, writes the profile to P+".end" and restores the rate. The window is
// the difference of the two files; probe computes it and drops samples whose
// stack passes through this package, so the agent's own allocations never
// count. cpu_profile starts a CPU profile into C at begin and stops it at end.
package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
)

// SocketEnv names the environment variable that carries the control socket's path.
const SocketEnv = "PERFSPY_AGENT_SOCK"

// Request is one command from probe.
type Request struct {
	Cmd         string `json:"cmd"`
	HeapProfile string `json:"heap_profile,omitempty"`
	CPUProfile  string `json:"cpu_profile,omitempty"`
	Copies      string `json:"copies,omitempty"` // path for the window's CopyReport
}

// Metrics are the runtime's cumulative counters at a snapshot.
type Metrics struct {
	AllocObjects uint64 `json:"alloc_objects"`
	AllocBytes   uint64 `json:"alloc_bytes"`
	TinyAllocs   uint64 `json:"tiny_allocs"`
	GCCycles     uint64 `json:"gc_cycles"`
}

// Response answers a Request. Error is empty on success.
type Response struct {
	Error      string   `json:"error,omitempty"`
	PID        int      `json:"pid,omitempty"`
	GOMAXPROCS int      `json:"gomaxprocs,omitempty"`
	GoVersion  string   `json:"go_version,omitempty"`
	Metrics    *Metrics `json:"metrics,omitempty"`
	Copies     bool     `json:"copies,omitempty"` // a copy counter is built in
}

// CopySource counts copies in a window. copyspy/inproc registers one when
// the target is built with the copyspy runtime overlay.
type CopySource interface {
	Begin() error
	End(path string) error
}

var copySource CopySource

// RegisterCopies installs the copy counter. It is called from an init.
func RegisterCopies(s CopySource) { copySource = s }

// CopyReport is the JSON file a CopySource writes at the end of a window.
type CopyReport struct {
	Dropped uint64     `json:"dropped"` // copies that found no free table slot
	Sites   []CopySite `json:"sites"`
}

// CopySite is one stack's copies in the window, by size bucket
// (<64, <1K, <16K, >=16K bytes).
type CopySite struct {
	Kind  string     `json:"kind"`  // memmove or memclr
	Stack []PCFrames `json:"stack"` // innermost first: [0] is the direct caller
	Calls [4]uint64  `json:"calls"`
	Bytes [4]uint64  `json:"bytes"`
}

// PCFrames is one return PC and the frames it expands to, inlined ones
// first.
type PCFrames struct {
	PC     uint64  `json:"pc"`
	Frames []Frame `json:"frames"`
}

// Frame is a symbolized function.
type Frame struct {
	Func string `json:"func"`
	File string `json:"file"`
	Line int    `json:"line"`
}

func init() {
	path := os.Getenv(SocketEnv)
	if path == "" {
		return
	}
	// Children of the target must not try to serve the same socket.
	os.Unsetenv(SocketEnv)
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
		var req Request
		var resp Response
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
	mu       sync.Mutex
	open     bool
	heapPath string
	oldRate  int
	cpuFile  *os.File
	copyPath string
}

func (w *window) do(req Request) Response {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch req.Cmd {
	case "hello":
		return Response{PID: os.Getpid(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), Copies: copySource != nil}
	case "begin":
		if w.open {
			return Response{Error: "window already open"}
		}
		if err := w.begin(req); err != nil {
			return Response{Error: err.Error()}
		}
		w.open = true
		return Response{Metrics: readMetrics()}
	case "end":
		if !w.open {
			return Response{Error: "no window open"}
		}
		w.open = false
		// Metrics first, so the agent's own work in end is not counted.
		m := readMetrics()
		if err := w.end(); err != nil {
			return Response{Error: err.Error()}
		}
		return Response{Metrics: m}
	}
	return Response{Error: fmt.Sprintf("unknown command %q", req.Cmd)}
}

func (w *window) begin(req Request) error {
	if req.HeapProfile != "" {
		w.oldRate = runtime.MemProfileRate
		runtime.MemProfileRate = 1
		w.heapPath = req.HeapProfile
		// The heap profile reflects allocations up to the last completed GC.
		runtime.GC()
		if err := writeHeap(req.HeapProfile); err != nil {
			runtime.MemProfileRate = w.oldRate
			return err
		}
	}
	if req.CPUProfile != "" {
		f, err := os.Create(req.CPUProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("starting cpu profile: %w", err)
		}
		w.cpuFile = f
	}
	// Copies last, so the heap profile's GC is outside their window.
	if req.Copies != "" {
		if copySource == nil {
			w.stopCPU()
			return fmt.Errorf("copy counting is not built into this binary")
		}
		if err := copySource.Begin(); err != nil {
			w.stopCPU()
			return fmt.Errorf("copies: %w", err)
		}
		w.copyPath = req.Copies
	}
	return nil
}

func (w *window) stopCPU() error {
	if w.cpuFile == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := w.cpuFile.Close()
	w.cpuFile = nil
	return err
}

func (w *window) end() error {
	var errs []error
	if w.copyPath != "" {
		errs = append(errs, copySource.End(w.copyPath))
		w.copyPath = ""
	}
	errs = append(errs, w.stopCPU())
	if w.heapPath != "" {
		runtime.GC()
		errs = append(errs, writeHeap(w.heapPath+".end"))
		runtime.MemProfileRate = w.oldRate
		w.heapPath = ""
	}
	return errors.Join(errs...)
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("writing heap profile: %w", err)
	}
	return f.Close()
}

var metricNames = []string{
	"/gc/heap/allocs:objects",
	"/gc/heap/allocs:bytes",
	"/gc/heap/tiny/allocs:objects",
	"/gc/cycles/total:gc-cycles",
}

// readMetrics reads the cumulative allocation counters. ReadMemStats first
// flushes the per-P caches, so the totals are current.
func readMetrics() *Metrics {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := make([]metrics.Sample, len(metricNames))
	for i, n := range metricNames {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return &Metrics{AllocObjects: v(0), AllocBytes: v(1), TinyAllocs: v(2), GCCycles: v(3)}
}
