// Package wire is the data model shared by the probe agent and the tools
// that read what it writes: the control protocol (one JSON Request per
// line, one JSON Response per line) and the reports the counters write at
// the end of a window. It uses the standard library only and has no side
// effects, so that any tool can import it without starting an agent.
package wire

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// SocketEnv names the environment variable that carries the control socket's path.
const SocketEnv = "PERFSPY_AGENT_SOCK"

// The live mode's environment (agent/live, docs/live.md).
const (
	PushEnv   = "PERFSPY_PUSH"   // the store's address: live mode is on
	SampleEnv = "PERFSPY_SAMPLE" // N: one request in N of each route is accounted
	// DefaultSample is N in live mode when SampleEnv is unset.
	DefaultSample = 64
	// MarksEnv=off keeps requests unmarked even under probe or in live
	// mode (no per-route figures): what an unconfigured binary pays,
	// measured under probe (probe cost -what live).
	MarksEnv = "PERFSPY_MARKS"
)

// SampleN is the N of one request in N, as the net/http overlay reads it
// at start: SampleEnv, or DefaultSample in live mode; 0 when requests are
// not sampled (every request counted).
func SampleN(getenv func(string) string) int {
	v := getenv(SampleEnv)
	if v == "" && getenv(PushEnv) != "" && getenv(SocketEnv) == "" {
		return DefaultSample
	}
	n, err := strconv.ParseUint(v, 10, 31)
	if err != nil {
		return 0
	}
	return int(n)
}

// Request is one command from probe.
type Request struct {
	Cmd         string `json:"cmd"`
	HeapProfile string `json:"heap_profile,omitempty"`
	CPUProfile  string `json:"cpu_profile,omitempty"`
	// Trace starts an execution trace into this path at begin; end stops it.
	Trace string `json:"trace,omitempty"`
	// Blocking sets the block and mutex profile rates to 1 at begin and
	// writes both profiles at begin (to Blocking+".block", ".mutex") and at
	// end (the same plus ".end"); end restores the rates.
	Blocking string `json:"blocking,omitempty"`
	// Retained sets runtime.MemProfileRate to 1 at begin, runs two GCs and
	// writes the heap profile to Retained and the goroutines (their
	// stacks and creators, debug=2) to Retained+".goroutines"; end runs
	// two GCs and writes both again with ".end", and restores the rate.
	// What the window's allocations left live is the difference.
	Retained string `json:"retained,omitempty"`
	// Counters maps a registered counter's name ("copies", "allocs") to the
	// path of the report it writes at the end of the window.
	Counters map[string]string `json:"counters,omitempty"`
	// BillEvery: the "bills" counter gives one request in BillEvery a
	// bill (every request when 0 or 1).
	BillEvery int `json:"bill_every,omitempty"`
}

// Metrics are the runtime's cumulative counters at a snapshot.
type Metrics struct {
	AllocObjects uint64 `json:"alloc_objects"` // /gc/heap/allocs:objects: heap blocks
	// CPUNanos is the process's CPU time so far (getrusage RUSAGE_SELF,
	// user and system): CPU per request where probe cannot read the
	// target's /proc (macOS).
	CPUNanos uint64 `json:"cpu_ns,omitempty"`
	// GoroutinesCreated is /sched/goroutines-created:goroutines, the
	// goroutines created so far; nil where the runtime has no such
	// metric (before Go 1.26).
	GoroutinesCreated *uint64 `json:"goroutines_created,omitempty"`
}

// Response answers a Request. Error is empty on success.
type Response struct {
	Error      string   `json:"error,omitempty"`
	PID        int      `json:"pid,omitempty"`
	GOMAXPROCS int      `json:"gomaxprocs,omitempty"`
	GoVersion  string   `json:"go_version,omitempty"`
	Metrics    *Metrics `json:"metrics,omitempty"`
	Counters   []string `json:"counters,omitempty"` // the counters built in, sorted
	// Listeners answers "listeners": the process's listening sockets,
	// "tcp HOST:PORT" or "udp HOST:PORT".
	Listeners []string `json:"listeners,omitempty"`
	// AddrFlags answers "listeners" too: the target's command-line flags
	// (package flag's) whose value is an address ("NAME=VALUE"), which a
	// refusal of several listeners offers as -addr flag:NAME.
	AddrFlags []string `json:"addr_flags,omitempty"`
}

// CopyReport is the JSON file a CopySource writes at the end of a window.
type CopyReport struct {
	Dropped uint64     `json:"dropped"` // copies that found no free table slot
	Sites   []CopySite `json:"sites"`
}

// CopySite is one stack's copies in the window, by size bucket
// (<64, <1K, <16K, >=16K bytes).
type CopySite struct {
	Kind  string     `json:"kind"`            // memmove or memclr
	Route string     `json:"route,omitempty"` // the request's route (RouteReport); "" the background
	Slot  uint64     `json:"slot,omitempty"`  // the table slot's index plus one, as bills name it
	Stack []PCFrames `json:"stack"`           // innermost first: [0] is the direct caller
	Calls [4]uint64  `json:"calls"`
	Bytes [4]uint64  `json:"bytes"`
}

// CounterWords is how many counter words a slot of allocspy's and
// copyspy's tables has after its key, index and padding, as the runtime
// overlays declare them; AllocSiteOf and CopySiteOf read them.
const CounterWords = 9

// CopySiteOf decodes a copyspy slot: kind is its first counter word (1
// for memclr; it does not count), delta its counter words' change in the
// window (calls by size bucket, then bytes by size bucket, after kind).
func CopySiteOf(stack []PCFrames, kind uint64, delta []uint64) CopySite {
	s := CopySite{Kind: "memmove", Stack: stack}
	if kind == 1 {
		s.Kind = "memclr"
	}
	copy(s.Calls[:], delta[1:5])
	copy(s.Bytes[:], delta[5:9])
	return s
}

// AllocSiteOf decodes an allocspy slot from its counter words' change in
// the window: objects, blocks, bytes asked for, bytes taken.
func AllocSiteOf(stack []PCFrames, delta []uint64) AllocSite {
	return AllocSite{Stack: stack, Objects: delta[0], Blocks: delta[1], ReqBytes: delta[2], AllocBytes: delta[3]}
}

// RouteReport is the JSON file the "routes" counter writes at the end of a
// window: the routes the request marks named, with the requests that
// ended under each in the window, in the order they were named.
type RouteReport struct {
	// Sampled says the recorders counted only sampled requests' work
	// (PERFSPY_SAMPLE): per route, divide by SampledRequests.
	Sampled bool         `json:"sampled,omitempty"`
	Routes  []RouteCount `json:"routes"`
	// HandLost is the values (and time.AfterFunc functions) in the window
	// whose request the runtime's handoff table lost (another key's entry
	// took its place): the goroutines that took them worked for
	// "(unfollowed)" from then on, never for the route they had.
	HandLost uint64 `json:"hand_lost"`
	// Orphaned is the goroutines in the window whose request ended under
	// them or that handed it back (a worker that closed a task's channel):
	// what they did next is the unfollowed work of its route.
	Orphaned uint64 `json:"orphaned"`
}

// RouteCount is one route's requests in a window. Into names the route
// that every request begun under this one ended under, when the server's
// mux moved them (a path route to its pattern), "" otherwise;
// IntoSeveral is set when they ended under more than one.
type RouteCount struct {
	Name            string `json:"name"`
	Requests        uint64 `json:"requests"`
	SampledRequests uint64 `json:"sampled_requests,omitempty"`
	Into            string `json:"into,omitempty"`
	IntoSeveral     bool   `json:"into_several,omitempty"`
}

// AllocReport is the JSON file the allocation counter writes at the end of
// a window.
type AllocReport struct {
	Dropped uint64      `json:"dropped"` // allocations that found no free table slot
	Sites   []AllocSite `json:"sites"`
	// Closure is the runtime's own count of the window, when the recorder
	// counted every request (nil when it counted sampled ones only).
	Closure *AllocClosure `json:"closure,omitempty"`
}

// AllocClosure is the runtime's own count of a window's heap allocations:
// MemStats.Mallocs and TotalAlloc (every object, the tiny allocator's
// packed ones included, and the bytes of their size classes), read with
// the world stopped at the moments the recorder went on and off; and the
// allocations the recorder saw but kept out of the table. The table's
// objects and bytes, the dropped and the agent's add up to the runtime's,
// unless an allocation entry was not patched (a Go release's new path).
type AllocClosure struct {
	RuntimeObjects uint64 `json:"runtime_objects"`
	RuntimeBytes   uint64 `json:"runtime_bytes"`
	AgentObjects   uint64 `json:"agent_objects"` // the agent goroutine's own, kept out
	AgentBytes     uint64 `json:"agent_bytes"`
	DroppedBytes   uint64 `json:"dropped_bytes"` // the size-class bytes of the dropped allocations
}

// AllocSite is one stack's allocations in the window.
type AllocSite struct {
	Stack      []PCFrames `json:"stack"`           // innermost first: [0] is mallocgc's caller
	Route      string     `json:"route,omitempty"` // the request's route (RouteReport); "" the background
	Slot       uint64     `json:"slot,omitempty"`  // the table slot's index plus one, as bills name it
	Objects    uint64     `json:"objects"`         // objects as the program asked for them
	Blocks     uint64     `json:"blocks"`          // of those, the ones that took a heap slot of their own
	ReqBytes   uint64     `json:"req_bytes"`       // bytes asked for
	AllocBytes uint64     `json:"alloc_bytes"`     // bytes taken (size classes)
}

// BillReport is the JSON file the "bills" counter writes at the end of a
// window: each request that began and ended in it, with its own
// allocations by site (the slots of the window's AllocReport).
type BillReport struct {
	Began uint64 `json:"began"` // requests that began while billing was on
	Every int    `json:"every"` // one request in Every took a bill
	Cap   int    `json:"cap"`   // the most bills a window keeps
	Open  int    `json:"open"`  // bills of requests that had not ended
	// Missed are the sampled requests that found no free bill (live
	// mode, since the start).
	Missed uint64 `json:"missed,omitempty"`
	Bills  []Bill `json:"bills"` // the requests that ended, in the order they began
	// WaitStacks are the stacks the bills' Waits name, each once.
	WaitStacks []BillWaitStack `json:"wait_stacks,omitempty"`
}

// Bill is one request's own bill.
type Bill struct {
	DurationNS uint64 `json:"duration_ns"` // the handler's start to the response's end
	Route      string `json:"route,omitempty"`
	// Allocs are its allocations by AllocSite.Slot; OverObjects and
	// OverBytes those that found no room in the bill (its sites past the
	// bill's entries).
	Allocs      []BillSite `json:"allocs"`
	OverObjects uint64     `json:"over_objects,omitempty"`
	OverBytes   uint64     `json:"over_bytes,omitempty"`
	// PartsNS is its time by BillParts: CPU of every goroutine the
	// request ran on, and its own goroutine's time by state. Syscalls
	// counts the syscalls its goroutines entered.
	PartsNS  []uint64 `json:"parts_ns"`
	Syscalls uint64   `json:"syscalls"`
	// Peer names an HTTP/1 request as the load driver does: its
	// connection's remote port in bits 48 up, its number on the
	// connection below (0: not known).
	Peer uint64 `json:"peer,omitempty"`
	// Waits are its own goroutine's waits by stack (BillReport.WaitStacks).
	Waits []BillWait `json:"waits,omitempty"`
	// SyscallNrs are the syscalls package syscall made for it, by number
	// (eight numbers a bill; the rest are in Syscalls only).
	SyscallNrs []BillSyscall `json:"syscall_nrs,omitempty"`
	// Copies are its copies by CopySite.Slot (memmove's and memclr's,
	// when copyspy's recorder was on); OverCopies those that found no
	// room in the bill, by kind (memmove, then memclr; Slot 0).
	Copies     []BillCopy  `json:"copies,omitempty"`
	OverCopies [2]BillCopy `json:"over_copies"`
}

// BillCopy is a bill's copies at one site: calls and bytes.
type BillCopy struct {
	Slot  uint64 `json:"slot,omitempty"`
	Calls uint64 `json:"calls"`
	Bytes uint64 `json:"bytes"`
}

// BillSyscall is a bill's count of one syscall number.
type BillSyscall struct {
	Nr    int    `json:"nr"`
	Count uint64 `json:"count"`
}

// BillWait is a bill's time in one wait stack.
type BillWait struct {
	Key uint64 `json:"key"`
	NS  uint64 `json:"ns"`
}

// BillWaitStack is a wait stack the window's bills name: its part
// (BillParts' index) and its frames, from the function that parked.
type BillWaitStack struct {
	Key   uint64     `json:"key"`
	Part  int        `json:"part"`
	Stack []PCFrames `json:"stack"`
}

// BillParts name a bill's time parts, in the runtime's order (offcpu's
// parts, less the idle connection's wait, which no request has), then
// handoff: the request's own goroutine's waits that a goroutine it handed
// work to ended (a pool worker's reply; docs/routes.md, "Handoffs"), and
// unfollowed: its waits that a goroutine ended whose work was unfollowed or
// another request's (the work waited for is not on the bill).
var BillParts = []string{"cpu", "net", "sync", "syscall", "sched", "gc", "sleep", "other", "handoff", "unfollowed"}

// BillSite is a bill's count at one site: objects and bytes asked for.
type BillSite struct {
	Slot    uint64 `json:"slot"`
	Objects uint64 `json:"objects"`
	Bytes   uint64 `json:"bytes"`
}

// PCFrames is one return PC and the frames it expands to, inlined ones
// first.
type PCFrames struct {
	PC     uint64  `json:"pc"`
	Frames []Frame `json:"frames"`
}

// TruncatedFunc names the frame that ends a stack the recorder cut at its
// depth (128 PCs, as the runtime's own profiles): the frames further out
// were left out. It takes the place of the outermost frame, with PC 0, so
// that a flame graph shows where the cut is.
const TruncatedFunc = "[truncated]"

// MarkTruncated returns stack with the TruncatedFunc frame added at its
// outer end when truncated is set.
func MarkTruncated(stack []PCFrames, truncated bool) []PCFrames {
	if !truncated {
		return stack
	}
	return append(stack, PCFrames{Frames: []Frame{{Func: TruncatedFunc}}})
}

// Frame is a symbolized function.
type Frame struct {
	Func string `json:"func"`
	File string `json:"file"`
	Line int    `json:"line"`
}

// WriteJSON writes v to path as JSON; counters write their reports with it.
func WriteJSON(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(f).Encode(v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadJSON reads a report that WriteJSON wrote.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}

// WallclockReport is the JSON file the wall-clock sampler writes at the end
// of a window: every goroutine's stack, sampled Hz times a second.
type WallclockReport struct {
	Hz      int               `json:"hz"`
	Seconds float64           `json:"seconds"` // how long it sampled
	Samples []WallclockSample `json:"samples"`
}

// WallclockSample is one stack and the number of samples that found a
// goroutine in it.
type WallclockSample struct {
	Stack []PCFrames `json:"stack"` // innermost first
	Count uint64     `json:"count"`
}

// RetainedReport is the JSON file a retained window writes at its end (and
// the benchmark recorder for each result's run): the stacks whose objects
// in use grew over it, in bytes (and objects, 0 when they only got bigger),
// after two GCs at each end.
// Left out: the recorder's own, stacks with no frame outside the runtime
// (its caches), and sudogs (the runtime's records of blocked goroutines,
// kept in per-P caches: a leaked goroutine is counted among those left).
type RetainedReport struct {
	// Untracked are the blocks of a benchmark run's timed region that
	// allocspy's live table had no room for: what the run left is then
	// not known.
	Untracked uint64         `json:"untracked,omitempty"`
	Sites     []RetainedSite `json:"sites"`
}

// RetainedSite is one stack's growth: innermost first, from mallocgc's
// caller, as allocspy's.
type RetainedSite struct {
	Stack   []PCFrames `json:"stack"`
	Objects int64      `json:"objects"`
	Bytes   int64      `json:"bytes"`
}
