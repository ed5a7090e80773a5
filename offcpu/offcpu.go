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
	"github.com/perfspy/perfspy/schema"
	"io"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
	"golang.org/x/exp/trace"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/stacks"
)

// part indexes schema.RequestParts.
var part = func() map[string]int {
	m := map[string]int{}
	for i, p := range schema.RequestParts {
		m[p] = i
	}
	return m
}()

// Scopes of a wait: inside a request's region, or not.
const (
	ScopeRequest    = "request"
	ScopeBackground = "background"
)

// Result is the off-CPU time of a window.
type Result struct {
	// Nanos is every wait that ended in the window, by reason: the
	// requests' and the background's together.
	Nanos map[string]int64
	// Background is the waits of goroutines outside any request, by reason.
	Background map[string]int64
	// Requests are the requests whose region began and ended in the window.
	Requests []Request
	Samples  []Sample
	Span     int64 // nanoseconds from the first to the last event
	// Windows is, with Options.Window, the waits that ended in each
	// window, by window and reason.
	Windows map[string]map[string]int64
}

// Request is one request's server-side time, from its region's start to
// its end, split into schema.RequestParts (indexed so).
type Request struct {
	// Route is the route the request ended under, as logged in its
	// region (RouteCategory); "" when none was.
	Route string
	Total int64
	Parts [9]int64
	// Waits are its waits, as indexes into Result.Samples and nanoseconds.
	Waits []Wait
}

// Wait is part of a request's time spent at one sample's stack.
type Wait struct {
	Sample int
	Nanos  int64
}

// Sample is the time goroutines waited at one stack for one reason.
type Sample struct {
	Reason string
	Wait   string // the runtime's words for it ("chan receive", "network"...)
	Scope  string // ScopeRequest or ScopeBackground
	// WokenBy is the function that made the goroutine runnable again:
	// the first frame outside the runtime of the goroutine that unblocked
	// it, "runtime" when the scheduler did (netpoll, timers), "" for a
	// runnable or syscall state.
	WokenBy string
	Window  string // with Options.Window: the window it ended in
	Stack   []trace.StackFrame
	Nanos   int64
	Count   int64
}

// Options tune Parse. Zero fields get defaults.
type Options struct {
	// Exclude drops waits whose stack has a function with one of these
	// prefixes (probe's agent and the tracer's and profilers' goroutines).
	Exclude []string
	// RegionType names the trace region that marks a request (default
	// RegionType, the one the overlay opens).
	RegionType string
	// Window, when set, is the category of trace.Log events that open
	// ("open ID") and close ("close") windows: only waits that end in a
	// window count, from the window's opening at the earliest, by window
	// (Result.Windows, Sample.Window).
	Window string
	// Truncated reads a trace whose process was stopped while it wrote:
	// what was read before the trace breaks off is the result.
	Truncated bool
}

type gstate struct {
	state  trace.GoState
	since  trace.Time
	reason string
	stack  trace.Stack
	waker  string
	// assist is the start of a GC mark assist range, 0 if none.
	assist trace.Time
	// req is the request the goroutine is serving, nil if none; mark is
	// where its running time was last accounted.
	req  *Request
	mark trace.Time
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

// waker names the function that unblocked a goroutine, from the stack of
// the goroutine that emitted the transition.
func waker(ev *trace.Event, self trace.GoID) string {
	if ev.Goroutine() == trace.NoGoroutine || ev.Goroutine() == self {
		return "runtime"
	}
	for f := range ev.Stack().Frames() {
		if !stacks.IsRuntime(f.Func) {
			return f.Func
		}
	}
	return "runtime"
}

// Parse reads a trace and returns the window's off-CPU time: every
// goroutine's waits, and each request's time split into Parts.
func Parse(r io.Reader, opt Options) (*Result, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	if opt.RegionType == "" {
		opt.RegionType = RegionType
	}
	p := &parser{opt: opt, gs: map[trace.GoID]*gstate{}, index: map[skey]int{}, excluded: map[trace.Stack]bool{}, wakers: map[trace.Stack]string{},
		res: &Result{Nanos: map[string]int64{}, Background: map[string]int64{}, Windows: map[string]map[string]int64{}}}
	var last trace.Time
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && opt.Truncated && p.first != 0 {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the trace: %w", err)
		}
		t := ev.Time()
		if p.first == 0 {
			p.first = t
		}
		last = t
		p.event(&ev, t)
	}
	p.res.Span = int64(last - p.first)
	p.finish()
	return p.res, nil
}

// skey is what makes two waits one sample.
type skey struct {
	reason, wait, scope, waker, window string
	stack                              trace.Stack
}

// parser follows every goroutine through a trace.
type parser struct {
	opt     Options
	res     *Result
	gs      map[trace.GoID]*gstate
	index   map[skey]int
	samples []*Sample
	first   trace.Time
	// window is the open window's ID ("" when none), opened at openAt.
	window string
	openAt trace.Time
	// excluded and wakers cache, by stack, what a walk of its frames
	// decides: a busy machine's trace has thousands of transitions a
	// stack (20 times the events of a quiet one, on logrus' benchmarks).
	excluded map[trace.Stack]bool
	wakers   map[trace.Stack]string
}

// isExcluded reports whether a frame of stack has one of opt.Exclude's
// prefixes.
func (p *parser) isExcluded(stack trace.Stack) bool {
	x, ok := p.excluded[stack]
	if !ok {
		x = hasPrefixFrame(stack, p.opt.Exclude)
		p.excluded[stack] = x
	}
	return x
}

// waker is waker(ev, self), its stack's walk cached.
func (p *parser) waker(ev *trace.Event, self trace.GoID) string {
	if ev.Goroutine() == trace.NoGoroutine || ev.Goroutine() == self {
		return "runtime"
	}
	st := ev.Stack()
	w, ok := p.wakers[st]
	if !ok {
		w = waker(ev, self)
		p.wakers[st] = w
	}
	return w
}

func (p *parser) g(id trace.GoID, state trace.GoState) *gstate {
	g := p.gs[id]
	if g == nil {
		g = &gstate{state: state}
		p.gs[id] = g
	}
	return g
}

func (p *parser) event(ev *trace.Event, t trace.Time) {
	switch ev.Kind() {
	case trace.EventLog:
		if l := ev.Log(); l.Category == RouteCategory && ev.Goroutine() != trace.NoGoroutine {
			if g := p.gs[ev.Goroutine()]; g != nil && g.req != nil {
				g.req.Route = l.Message
			}
		} else if p.opt.Window != "" && l.Category == p.opt.Window {
			id, open := strings.CutPrefix(l.Message, "open ")
			p.window, p.openAt = "", 0
			if open {
				p.window, p.openAt = id, t
			}
		}
	case trace.EventStateTransition:
		p.transition(ev, t)
	case trace.EventRegionBegin:
		if ev.Region().Type != p.opt.RegionType || ev.Goroutine() == trace.NoGoroutine {
			return
		}
		g := p.g(ev.Goroutine(), trace.GoRunning)
		g.req = &Request{}
		g.req.Total = -int64(t) // the start, until the end makes it a duration
		g.state, g.mark = trace.GoRunning, t
	case trace.EventRegionEnd:
		if ev.Region().Type != p.opt.RegionType || ev.Goroutine() == trace.NoGoroutine {
			return
		}
		g := p.gs[ev.Goroutine()]
		if g == nil || g.req == nil {
			return // began before the trace
		}
		p.flushRun(g, t)
		g.req.Total += int64(t)
		p.res.Requests = append(p.res.Requests, *g.req)
		g.req = nil
	case trace.EventRangeBegin, trace.EventRangeActive:
		if ev.Range().Name == "GC mark assist" && ev.Goroutine() != trace.NoGoroutine {
			g := p.g(ev.Goroutine(), trace.GoRunning)
			p.flushRun(g, t)
			g.assist = t
			if ev.Kind() == trace.EventRangeActive {
				g.assist = p.first
			}
		}
	case trace.EventRangeEnd:
		if ev.Range().Name != "GC mark assist" || ev.Goroutine() == trace.NoGoroutine {
			return
		}
		if g := p.gs[ev.Goroutine()]; g != nil && g.assist != 0 {
			// Outside a request the assist is a wait of its own (its time
			// is on CPU, but GC's work, not the target's).
			if g.req == nil {
				p.add(g, "gc", "GC mark assist", "", ev.Stack(), int64(t-g.assist))
			} else {
				p.flushRun(g, t)
			}
			g.assist = 0
		}
	}
}

// transition follows one goroutine's change of state: the time in the
// state it leaves is a wait, or its request's running time.
func (p *parser) transition(ev *trace.Event, t trace.Time) {
	st := ev.StateTransition()
	if st.Resource.Kind != trace.ResourceGoroutine {
		return
	}
	id := st.Resource.Goroutine()
	from, to := st.Goroutine()
	g := p.g(id, trace.GoUndetermined)
	// A wait that started before the trace counts from its start.
	if from == trace.GoUndetermined && (to == trace.GoWaiting || to == trace.GoRunnable || to == trace.GoSyscall) {
		g.state, g.since, g.reason, g.stack = to, p.first, st.Reason, st.Stack
		return
	}
	if g.state == trace.GoRunning && to != trace.GoRunning {
		p.flushRun(g, t)
	}
	if g.state == trace.GoWaiting && to == trace.GoRunnable {
		g.waker = p.waker(ev, id)
	}
	if (g.state == trace.GoWaiting || g.state == trace.GoRunnable || g.state == trace.GoSyscall) && to != g.state && g.since != 0 {
		wb := ""
		if g.state == trace.GoWaiting {
			wb = g.waker
		}
		since := g.since
		if p.opt.Window != "" && since < p.openAt {
			since = p.openAt // only the window's part of the wait
		}
		p.add(g, classify(g.state, g.reason, g.stack), waitWords(g.state, g.reason), wb, g.stack, int64(t-since))
	}
	if to == g.state {
		return
	}
	g.state, g.since, g.reason = to, t, st.Reason
	// A goroutine woken up has no stack of its own at that moment: its
	// runnable time keeps the stack it blocked at.
	if st.Stack != trace.NoStack || to != trace.GoRunnable {
		g.stack = st.Stack
	}
	switch to {
	case trace.GoRunning:
		g.mark = t
	case trace.GoNotExist:
		g.req = nil // a request whose goroutine ended (panic, hijack) is not counted
	}
}

// add counts a wait of g; in a request it is also the request's.
func (p *parser) add(g *gstate, reason, wait, wokenBy string, stack trace.Stack, d int64) {
	if d <= 0 || reason == "" || p.opt.Window != "" && p.window == "" || p.isExcluded(stack) {
		return
	}
	if p.opt.Window != "" {
		w := p.res.Windows[p.window]
		if w == nil {
			w = map[string]int64{}
			p.res.Windows[p.window] = w
		}
		w[reason] += d
	}
	scope := ScopeBackground
	if g.req != nil {
		scope = ScopeRequest
		g.req.Parts[part[reason]] += d
	} else {
		p.res.Background[reason] += d
	}
	p.res.Nanos[reason] += d
	k := skey{reason, wait, scope, wokenBy, p.window, stack}
	i, ok := p.index[k]
	if !ok {
		s := &Sample{Reason: reason, Wait: wait, Scope: scope, WokenBy: wokenBy, Window: p.window}
		for f := range stack.Frames() {
			s.Stack = append(s.Stack, f)
		}
		i = len(p.samples)
		p.index[k] = i
		p.samples = append(p.samples, s)
	}
	p.samples[i].Nanos += d
	p.samples[i].Count++
	if g.req != nil {
		g.req.Waits = append(g.req.Waits, Wait{Sample: i, Nanos: d})
	}
}

// flushRun gives g's running time since its mark to its request: GC assist
// work is the request's gc, the rest its cpu.
func (p *parser) flushRun(g *gstate, t trace.Time) {
	if g.req != nil && g.state == trace.GoRunning && g.mark != 0 && t > g.mark {
		i := part["cpu"]
		if g.assist != 0 {
			i = part["gc"]
		}
		g.req.Parts[i] += int64(t - g.mark)
	}
	g.mark = t
}

// finish sorts the samples, most time first, and renumbers the requests'
// references to them.
func (p *parser) finish() {
	order := make([]int, len(p.samples))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := p.samples[order[i]], p.samples[order[j]]
		if a.Nanos != b.Nanos {
			return a.Nanos > b.Nanos
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		if a.Scope != b.Scope {
			return a.Scope < b.Scope
		}
		if a.WokenBy != b.WokenBy {
			return a.WokenBy < b.WokenBy
		}
		if a.Window != b.Window {
			return a.Window < b.Window
		}
		return stackString(a.Stack) < stackString(b.Stack)
	})
	newIndex := make([]int, len(p.samples))
	for ni, oi := range order {
		newIndex[oi] = ni
		p.res.Samples = append(p.res.Samples, *p.samples[oi])
	}
	for ri := range p.res.Requests {
		for wi := range p.res.Requests[ri].Waits {
			w := &p.res.Requests[ri].Waits[wi]
			w.Sample = newIndex[w.Sample]
		}
	}
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
// delay/nanoseconds and waits/count, labels "reason", "wait", "scope"
// (request or background) and, for a wait that something ended,
// "woken_by".
//
// scope keeps the samples of one scope (ScopeRequest, ScopeBackground);
// "" keeps all.
func (r *Result) Profile(scope string) *profile.Profile {
	return r.profile(func(s Sample) bool { return scope == "" || s.Scope == scope })
}

// WindowProfile is Profile of the waits that ended in window id.
func (r *Result) WindowProfile(id string) *profile.Profile {
	return r.profile(func(s Sample) bool { return s.Window == id })
}

func (r *Result) profile(keep func(Sample) bool) *profile.Profile {
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "delay", Unit: "nanoseconds"}, {Type: "waits", Unit: "count"}},
		DefaultSampleType: "delay",
		PeriodType:        &profile.ValueType{Type: "delay", Unit: "nanoseconds"},
		Period:            1,
	}
	b := stacks.NewBuilder(p)
	for _, s := range r.Samples {
		if !keep(s) {
			continue
		}
		p.Sample = append(p.Sample, &profile.Sample{
			Location: b.Locations(pcFrames(s.Stack)),
			Value:    []int64{s.Nanos, s.Count},
			Label:    labels(s),
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

func labels(s Sample) map[string][]string {
	l := map[string][]string{"reason": {s.Reason}, "wait": {s.Wait}, "scope": {s.Scope}}
	if s.WokenBy != "" {
		l["woken_by"] = []string{s.WokenBy}
	}
	return l
}
