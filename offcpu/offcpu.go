// Package offcpu measures the time goroutines spend off CPU, by reason,
// from a Go execution trace of a window (golang.org/x/exp/trace).
//
// Each goroutine's state transitions are followed. A wait counts when it
// ends inside the window (the goroutine came back to run): a goroutine
// that stays blocked to the end, like an idle worker pool, waited for no
// request. Reasons:
//
//	net      blocked on the network (netpoll)
//	net_idle the same, where the server waits for the client: an HTTP
//	         connection idle between keep-alive requests
//	         (net/http.(*conn).readRequest) and the background read that
//	         watches for the client to go away (net/http.(*connReader).backgroundRead)
//	sync     channels, select, sync.Mutex/RWMutex/WaitGroup, sync.Cond
//	syscall  in a system call (that went through entersyscall)
//	sched    runnable, waiting for a P
//	gc       GC assist (the range "GC mark assist") and waits for the GC
//	sleep    time.Sleep and timers
//	other    any other wait
//
// The runtime's own goroutines waiting for work (GC workers, the sweeper)
// are left out.
//
// Blind spots: the trace sees only syscalls made through entersyscall (not
// the runtime's own epoll and futex calls, nor RawSyscall); time a thread
// spends descheduled by the kernel while its goroutine runs is not off-CPU
// here.
package offcpu

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
	"golang.org/x/exp/trace"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/stacks"
)

// Reasons in the order summary.json and the report list them.
var Reasons = []string{"net", "sync", "syscall", "sched", "gc", "sleep", "other", "net_idle"}

// Result is the off-CPU time of a window.
type Result struct {
	Nanos   map[string]int64 // by reason
	Samples []Sample
	Span    int64 // nanoseconds from the first to the last event
}

// Sample is the time goroutines waited at one stack for one reason.
type Sample struct {
	Reason string
	Wait   string // the runtime's words for it ("chan receive", "network"...)
	Stack  []trace.StackFrame
	Nanos  int64
	Count  int64
}

// Options tune Parse. Zero fields get defaults.
type Options struct {
	// Exclude drops waits whose stack has a function with one of these
	// prefixes (probe's agent and the tracer's and profilers' goroutines).
	Exclude []string
}

type gstate struct {
	state  trace.GoState
	since  trace.Time
	reason string
	stack  trace.Stack
	assist trace.Time // start of a GC mark assist range, 0 if none
}

// classify maps a wait to a reason.
func classify(from trace.GoState, wait string, stack trace.Stack) string {
	switch from {
	case trace.GoRunnable:
		return "sched"
	case trace.GoSyscall:
		return "syscall"
	}
	switch wait {
	case "network":
		for f := range stack.Frames() {
			if f.Func == "net/http.(*conn).readRequest" || f.Func == "net/http.(*connReader).backgroundRead" {
				return "net_idle"
			}
		}
		return "net"
	case "chan receive", "chan send", "select", "sync", "sync.(*Cond).Wait":
		return "sync"
	case "GC mark assist wait for work", "wait until GC ends", "GC weak to strong wait":
		return "gc"
	case "sleep":
		return "sleep"
	case "system goroutine wait", "GC background sweeper wait", "forever":
		return "" // the runtime's own goroutines, idle by design
	}
	return "other"
}

func hasPrefixFrame(stack trace.Stack, prefixes []string) bool {
	for f := range stack.Frames() {
		for _, p := range prefixes {
			if strings.HasPrefix(f.Func, p) {
				return true
			}
		}
	}
	return false
}

// Parse reads a trace and returns the window's off-CPU time.
func Parse(r io.Reader, opt Options) (*Result, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	res := &Result{Nanos: map[string]int64{}}
	gs := map[trace.GoID]*gstate{}
	type skey struct {
		reason, wait string
		stack        trace.Stack
	}
	agg := map[skey]*Sample{}
	add := func(reason, wait string, stack trace.Stack, d int64) {
		if d <= 0 || reason == "" || hasPrefixFrame(stack, opt.Exclude) {
			return
		}
		res.Nanos[reason] += d
		k := skey{reason, wait, stack}
		s := agg[k]
		if s == nil {
			s = &Sample{Reason: reason, Wait: wait}
			for f := range stack.Frames() {
				s.Stack = append(s.Stack, f)
			}
			agg[k] = s
		}
		s.Nanos += d
		s.Count++
	}
	var first, last trace.Time
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the trace: %w", err)
		}
		t := ev.Time()
		if first == 0 {
			first = t
		}
		last = t
		switch ev.Kind() {
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := st.Resource.Goroutine()
			from, to := st.Goroutine()
			g := gs[id]
			if g == nil {
				g = &gstate{state: trace.GoUndetermined}
				gs[id] = g
			}
			// A wait that started before the trace counts from its start.
			if from == trace.GoUndetermined && (to == trace.GoWaiting || to == trace.GoRunnable || to == trace.GoSyscall) {
				g.state, g.since, g.reason, g.stack = to, first, st.Reason, st.Stack
				continue
			}
			if g.state == trace.GoWaiting || g.state == trace.GoRunnable || g.state == trace.GoSyscall {
				if to != g.state && g.since != 0 {
					add(classify(g.state, g.reason, g.stack), waitWords(g.state, g.reason), g.stack, int64(t-g.since))
				}
			}
			if to != g.state {
				g.state, g.since, g.reason = to, t, st.Reason
				// A goroutine woken up has no stack of its own at that
				// moment: its runnable time keeps the stack it blocked at.
				if st.Stack != trace.NoStack || to != trace.GoRunnable {
					g.stack = st.Stack
				}
			}
		case trace.EventRangeBegin, trace.EventRangeActive:
			rg := ev.Range()
			if rg.Name == "GC mark assist" && ev.Goroutine() != trace.NoGoroutine {
				g := gs[ev.Goroutine()]
				if g == nil {
					g = &gstate{state: trace.GoRunning}
					gs[ev.Goroutine()] = g
				}
				g.assist = t
				if ev.Kind() == trace.EventRangeActive {
					g.assist = first
				}
			}
		case trace.EventRangeEnd:
			rg := ev.Range()
			if rg.Name == "GC mark assist" && ev.Goroutine() != trace.NoGoroutine {
				if g := gs[ev.Goroutine()]; g != nil && g.assist != 0 {
					add("gc", "GC mark assist", ev.Stack(), int64(t-g.assist))
					g.assist = 0
				}
			}
		}
	}
	res.Span = int64(last - first)
	for _, s := range agg {
		res.Samples = append(res.Samples, *s)
	}
	sort.Slice(res.Samples, func(i, j int) bool {
		a, b := res.Samples[i], res.Samples[j]
		if a.Nanos != b.Nanos {
			return a.Nanos > b.Nanos
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return stackString(a.Stack) < stackString(b.Stack)
	})
	return res, nil
}

func waitWords(state trace.GoState, reason string) string {
	switch state {
	case trace.GoRunnable:
		return "runnable"
	case trace.GoSyscall:
		return "syscall"
	}
	if reason == "" {
		return "unspecified"
	}
	return reason
}

func stackString(st []trace.StackFrame) string {
	var b strings.Builder
	for _, f := range st {
		fmt.Fprintf(&b, "%s:%d;", f.Func, f.PC)
	}
	return b.String()
}

// Profile writes the samples as a pprof profile: sample types
// delay/nanoseconds and waits/count, labels "reason" and "wait".
func (r *Result) Profile() *profile.Profile {
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "delay", Unit: "nanoseconds"}, {Type: "waits", Unit: "count"}},
		DefaultSampleType: "delay",
		PeriodType:        &profile.ValueType{Type: "delay", Unit: "nanoseconds"},
		Period:            1,
	}
	b := stacks.NewBuilder(p)
	for _, s := range r.Samples {
		p.Sample = append(p.Sample, &profile.Sample{
			Location: b.Locations(pcFrames(s.Stack)),
			Value:    []int64{s.Nanos, s.Count},
			Label:    map[string][]string{"reason": {s.Reason}, "wait": {s.Wait}},
		})
	}
	return p
}

// pcFrames groups a trace stack's frames by PC: frames that share a PC
// are one call site with inlined calls, innermost first.
func pcFrames(st []trace.StackFrame) []wire.PCFrames {
	var out []wire.PCFrames
	for _, f := range st {
		fr := wire.Frame{Func: f.Func, File: f.File, Line: int(f.Line)}
		if n := len(out); n > 0 && out[n-1].PC == f.PC {
			out[n-1].Frames = append(out[n-1].Frames, fr)
			continue
		}
		out = append(out, wire.PCFrames{PC: f.PC, Frames: []wire.Frame{fr}})
	}
	return out
}
