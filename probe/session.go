package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/elfsym"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/syscalls"

	"github.com/perfspy/perfspy/internal/proc"

	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/schema"

	"github.com/perfspy/perfspy/internal/cache"
)

// session is one started target with its agent, load driver and syscall
// counter: a run opens its windows on it. close stops everything it
// started, in reverse order.
type session struct {
	cfg     Config
	in      internals
	plan    proc.CPUPlan
	tgt     *withagent.Binary
	commit  string
	out     string // the results folder
	priv    string // private folder: the agent's socket and files
	p       *proc.Proc
	addr    proc.Endpoint
	ac      *agentConn
	hello   *wire.Response
	drv     load.Driver
	sc      *sysCounter
	sysNote string // why syscalls are not counted with eBPF
	// noSyscalls says why syscalls are not counted at all (-syscalls
	// off, -exec).
	noSyscalls string
	allowed    []string // the target's CPU affinity, read back
	coresHad   float64
	reasons    []string // what already makes the run not judged
	logf       func(string, ...any)
	undo       []func()
	// wrap, when set, starts the target under another program (valgrind):
	// it returns the command, its arguments and environment to add.
	wrap  func(binary string, args []string) (cmd string, cmdArgs, env []string)
	grace time.Duration // how long stop waits before it kills (0: the default)
}

// close undoes what start did.
func (s *session) close() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// cpuWait is how long a run waits for CPUs another probe run holds.
const cpuWait = 2 * time.Minute

// startSession builds nothing: it prepares the folders, pins the load,
// starts tgt, waits until it listens, greets the agent, checks the CPU
// pinning, and opens the driver and the syscall counter. On error,
// everything started is stopped.
func startSession(ctx context.Context, cfg Config, in internals, plan proc.CPUPlan, tgt *withagent.Binary, logf func(string, ...any)) (*session, error) {
	s := newSession(cfg, plan, tgt, logf)
	s.in = in
	if err := s.start(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// newSession is a session not started yet: set wrap and grace, then start.
func newSession(cfg Config, plan proc.CPUPlan, tgt *withagent.Binary, logf func(string, ...any)) *session {
	s := &session{cfg: cfg, plan: plan, tgt: tgt, logf: logf}
	if len(cfg.Exec) > 0 {
		s.wrap = func(bin string, args []string) (string, []string, []string) {
			return cfg.Exec[0], append(append(append([]string(nil), cfg.Exec[1:]...), bin), args...), nil
		}
	}
	return s
}

func (s *session) start(ctx context.Context) error {
	cfg, plan, tgt, logf := s.cfg, s.plan, s.tgt, s.logf
	var err error
	if s.commit, s.out, s.priv, err = prepareRun(cfg, tgt); err != nil {
		return err
	}
	s.undo = append(s.undo, func() { os.RemoveAll(s.priv) })
	sock := filepath.Join(s.priv, "agent.sock")
	// CPUs no other probe run holds: two runs on one machine would
	// share them and measure each other.
	root, err := cache.Dir()
	if err != nil {
		return err
	}
	res, err := proc.Locks{Dir: proc.LockDir(root), CPUs: runtime.NumCPU(), Wait: cpuWait, Logf: logf}.Reserve(ctx, plan, cfg.CPUs == "auto")
	if err != nil {
		return err
	}
	s.undo = append(s.undo, res.Release)
	s.plan, plan = res.Plan, res.Plan
	unpin, err := pinLoad(plan)
	if err != nil {
		return err
	}
	s.undo = append(s.undo, unpin)
	addr, targetArgs, err := listenAddr(cfg.Addr, cfg.Args)
	if err != nil {
		return err
	}
	bin, args, env := tgt.Binary, targetArgs, []string{wire.SocketEnv + "=" + sock}
	if s.wrap != nil {
		var more []string
		bin, args, more = s.wrap(tgt.Binary, targetArgs)
		env = append(env, more...)
	}
	if !proc.CanPin && cfg.CPUs == "auto" {
		logf("the target and the load driver are not pinned: CPU pinning is not available on this platform (%s)", runtime.GOOS)
	}
	logf("starting %s", tgt.Binary)
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = targetEnv(cfg, env...), cfg.Dir
	if s.p, err = proc.StartRun(cmd, filepath.Join(s.out, "target.log"), plan.Server, s.priv); err != nil {
		return err
	}
	if s.grace > 0 {
		s.p.Grace = s.grace
	}
	s.undo = append(s.undo, s.p.Stop)
	if s.addr, err = proc.WaitReady(ctx, s.p, addr, sock, cfg.ReadyTimeout, askListeners(ctx, sock)); err != nil {
		return listenersAdvice(ctx, sock, err)
	}
	logf("target pid %d listens on %s", s.p.Pid, s.addr.Addr)
	if s.ac, err = dialAgent(ctx, sock); err != nil {
		return fmt.Errorf("connecting to the agent: %w", err)
	}
	s.undo = append(s.undo, func() { s.ac.Close() })
	if s.hello, err = s.ac.call(wire.Request{Cmd: "hello"}); err != nil {
		return err
	}
	s.checkPinning()
	s.cfg.Proto = s.cfg.Spec.Resolve(ctx, load.Endpoint(s.addr))
	if s.drv, err = s.cfg.Spec.New(load.Endpoint(s.addr)); err != nil {
		return err
	}
	s.undo = append(s.undo, func() { s.drv.Close() })
	return s.openSyscalls()
}

// checkPinning reads back the CPU affinity of the target and of probe: a
// pin that did not hold makes the run not judged.
func (s *session) checkPinning() {
	s.allowed, _ = proc.AllowedCPUs(s.p.Pid)
	s.coresHad = float64(s.hello.GOMAXPROCS)
	if len(s.plan.Server) > 0 {
		want := schema.CPUList(s.plan.Server)
		if len(s.allowed) != 1 || s.allowed[0] != want {
			s.reasons = append(s.reasons, fmt.Sprintf("target affinity read back as %v, want %s", s.allowed, want))
		}
		s.coresHad = min(s.coresHad, float64(len(s.plan.Server)))
	} else {
		s.coresHad = min(s.coresHad, float64(runtime.NumCPU()))
	}
	if len(s.plan.Load) > 0 {
		self, _ := proc.AllowedCPUs(os.Getpid())
		want := schema.CPUList(s.plan.Load)
		if len(self) != 1 || self[0] != want {
			s.reasons = append(s.reasons, fmt.Sprintf("load driver affinity read back as %v, want %s", self, want))
		}
	}
}

// openSyscalls opens the eBPF syscall counter, or notes why not: syscalls
// are then the read/write family from /proc/PID/io.
func (s *session) openSyscalls() error {
	switch {
	case len(s.cfg.Exec) > 0:
		// The process is the emulator: its system calls are not the
		// program's, one for one.
		s.noSyscalls = "-exec " + s.cfg.Exec[0] + ": the target runs under it, whose system calls are not the program's"
		return nil
	case s.cfg.Syscalls == "off":
		s.noSyscalls = "-syscalls off"
		return nil
	case s.cfg.Syscalls == "proc-io":
		return nil
	}
	open := syscalls.Open
	if s.in.seams.syscallsOpen != nil {
		open = s.in.seams.syscallsOpen
	}
	c, err := open(s.p.Pid)
	if err != nil {
		s.sysNote = err.Error()
		s.logf("syscalls: %v; counting the read/write family from /proc/PID/io", err)
		return nil
	}
	s.undo = append(s.undo, func() { c.Close() })
	sym, err := elfsym.Open(s.tgt.Binary, s.p.Pid)
	if err != nil {
		return fmt.Errorf("symbols of %s: %w", s.tgt.Binary, err)
	}
	s.sc = &sysCounter{c: c, sym: sym}
	return nil
}

// windowKind is what a window is for; its label (in progress lines) is
// derived from it, and nothing depends on the label.
type windowKind int

const (
	timingKind      windowKind = iota // cheap counters: CPU, syscalls, latency
	attributionKind                   // allocspy and copyspy, or the heap profile
	copyKind                          // copyspy apart from the heap profile
	offCPUKind                        // execution trace, block and mutex profiles
	wallclockKind                     // the agent's wall-clock sampler
	retainedKind                      // the heap profile at rate 1, goroutines: what requests leave
)

var windowLabels = [...]string{timingKind: "timing window", attributionKind: "attribution window", copyKind: "copy window", offCPUKind: "off-CPU window", wallclockKind: "wall-clock window", retainedKind: "retained window"}

func (k windowKind) String() string { return windowLabels[k] }

// windowSpec is one window of a run: its kind, and the request file's
// entry it measures alone ("" for the run's own windows).
type windowSpec struct {
	kind     windowKind
	endpoint string
}

func (w windowSpec) label() string {
	if w.endpoint != "" {
		return w.endpoint + ": " + w.kind.String()
	}
	return w.kind.String()
}

// stacks tells whether the window records syscall stacks, which cost
// more than counts (a third more CPU on a light handler): the run's
// off-CPU window, or its attribution window when it has no off-CPU
// window.
func (s *session) stacks(w windowSpec) bool {
	return w.endpoint == "" && (w.kind == offCPUKind || w.kind == attributionKind && !s.offCPUWindow())
}

// whileAlive is ctx, canceled too when the target exits: a load that
// outlives its target would only count errors to the window's end.
func whileAlive(ctx context.Context, p *proc.Proc) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-c.Done():
		}
	}()
	return c, cancel
}

// window warms up, then measures one window.
func (s *session) window(ctx context.Context, spec windowSpec, req wire.Request) (*windowResult, error) {
	name := spec.label()
	warm, dur := s.lengths(spec)
	if req.Retained != "" {
		if _, err := s.ac.call(wire.Request{Cmd: "prepare", Retained: req.Retained}); err != nil {
			return nil, err
		}
	}
	if warm > 0 {
		s.logf("%s: warm-up %v", name, warm)
		wctx, stop := whileAlive(ctx, s.p)
		r, err := s.drv.Run(wctx, warm)
		stop()
		if s.p.Exited() {
			return nil, fmt.Errorf("target exited during warm-up: %s", s.p.ExitStatus())
		}
		if err != nil {
			return nil, err
		}
		if r != nil && r.OK == 0 && r.Errors+r.Non2xx > 0 {
			// A certificate that does not verify, another protocol, a
			// wrong path: said before any window opens.
			return nil, fmt.Errorf("no request of the warm-up succeeded (%d failed, %d answered with a failure): %s", r.Errors, r.Non2xx, r.FirstErr)
		}
	}
	s.logf("%s: snapshot 1, load for %v", name, dur)
	return s.measure(ctx, req, dur, s.stacks(spec))
}

// laterWarmup bounds the warm-up of the windows after the timing window:
// the server is warm by then; its connections are open.
const laterWarmup = 250 * time.Millisecond

// lengths are a window's warm-up and load. The timing window takes the
// flags' (-warmup, -duration): its figures are rates and percentiles,
// which want time. The others count (allocations, copies, syscalls by
// stack) or sample the same steady state (off-CPU, wall clock): they
// need requests, not time, and take at most -exact-duration, after a
// warm-up of at most 250 ms.
func (s *session) lengths(spec windowSpec) (warm, dur time.Duration) {
	warm, dur = s.cfg.Warmup, s.cfg.Duration
	if spec.kind != timingKind {
		warm = min(warm, laterWarmup)
		if s.cfg.ExactDuration > 0 {
			dur = min(dur, s.cfg.ExactDuration)
		}
	}
	return warm, dur
}

// windows opens a run's windows in order: timing, attribution, copies
// (when the heap profile shares the attribution window), off-CPU. raw
// says where the agent wrote what.
func (s *session) windows(ctx context.Context) (windows, rawFiles, error) {
	var w windows
	raw := rawFiles{cpu: filepath.Join(s.priv, "cpu.pprof")}
	var err error
	if w.clean, err = s.window(ctx, windowSpec{kind: timingKind}, wire.Request{Cmd: "begin", CPUProfile: raw.cpu}); err != nil {
		return w, raw, err
	}
	w.attr, w.copies = w.clean, w.clean // a timing-only run (the floor) has no other window
	if s.in.timingOnly {
		return w, raw, nil
	}
	attrReq, copiesApart := s.attributionRequest(&raw, w.clean.load.RPS())
	if w.attr, err = s.window(ctx, windowSpec{kind: attributionKind}, attrReq); err != nil {
		return w, raw, err
	}
	w.copies = w.attr
	if copiesApart {
		raw.copies = filepath.Join(s.priv, "copies.json")
		req := wire.Request{Cmd: "begin", Counters: map[string]string{"copies": raw.copies}}
		if s.in.seams.attributionCPUProfile {
			req.CPUProfile = filepath.Join(s.priv, "cpu-copies.pprof")
		}
		if w.copies, err = s.window(ctx, windowSpec{kind: copyKind}, req); err != nil {
			return w, raw, err
		}
	}
	if s.offCPUWindow() {
		if w.off, err = s.window(ctx, windowSpec{kind: offCPUKind}, s.offCPURequest(&raw)); err != nil {
			return w, raw, err
		}
	}
	if s.cfg.OffCPU && s.cfg.Wallclock {
		req, err := s.wallclockRequest(&raw)
		if err != nil {
			return w, raw, err
		}
		if w.wall, err = s.window(ctx, windowSpec{kind: wallclockKind}, req); err != nil {
			return w, raw, err
		}
	}
	if s.cfg.Retained {
		raw.retained = filepath.Join(s.priv, "live.pprof")
		if w.retained, err = s.window(ctx, windowSpec{kind: retainedKind}, wire.Request{Cmd: "begin", Retained: raw.retained}); err != nil {
			return w, raw, err
		}
	}
	w.endpoints, err = s.endpointWindows(ctx)
	return w, raw, err
}

// offCPUWindow tells whether the run has an off-CPU window: the
// execution trace with the block and mutex profiles (not with
// -fgprof-only, whose wall-clock window is alone).
func (s *session) offCPUWindow() bool {
	return s.cfg.OffCPU && !s.cfg.FgprofOnly && !s.in.timingOnly
}

// attributionRequest is the attribution window's begin: allocspy and
// copyspy counting, or the heap profile at rate 1. copiesApart says that
// the copies need a window of their own: at MemProfileRate=1 the heap
// profiler's own stack walks would count as copies.
func (s *session) attributionRequest(raw *rawFiles, rps float64) (req wire.Request, copiesApart bool) {
	useAllocspy := s.tgt.Allocs && slices.Contains(s.hello.Counters, "allocs")
	useCopies := s.tgt.Copies && slices.Contains(s.hello.Counters, "copies")
	req = wire.Request{Cmd: "begin", Counters: map[string]string{}}
	if useAllocspy {
		raw.allocs = filepath.Join(s.priv, "allocs.json")
		req.Counters["allocs"] = raw.allocs
	}
	if !useAllocspy || s.in.seams.crossCheck {
		raw.heap = filepath.Join(s.priv, "heap.pprof")
		req.HeapProfile = raw.heap
	}
	copiesApart = useCopies && req.HeapProfile != ""
	if useCopies && !copiesApart {
		raw.copies = filepath.Join(s.priv, "copies.json")
		req.Counters["copies"] = raw.copies
	}
	// Requests per route, when the request mark is built in (the
	// allocspy, copyspy and net/http overlays add it).
	if (useAllocspy || useCopies && !copiesApart) && slices.Contains(s.hello.Counters, "routes") {
		raw.routes = filepath.Join(s.priv, "routes.json")
		req.Counters["routes"] = raw.routes
	}
	// Each request's own bill, when the recorder keeps them.
	if useAllocspy && !s.cfg.NoBills && slices.Contains(s.hello.Counters, "bills") {
		raw.bills = filepath.Join(s.priv, "bills.json")
		req.Counters["bills"] = raw.bills
		_, dur := s.lengths(windowSpec{kind: attributionKind})
		req.BillEvery = billEvery(rps, dur)
	}
	if s.in.seams.attributionCPUProfile {
		req.CPUProfile = filepath.Join(s.priv, "cpu-attribution.pprof")
	}
	return req, copiesApart
}

// offCPURequest is the off-CPU window's begin: the execution trace, the
// block and mutex profiles.
func (s *session) offCPURequest(raw *rawFiles) wire.Request {
	raw.blocking = filepath.Join(s.priv, "blocking")
	raw.trace = filepath.Join(s.priv, "trace.out")
	return wire.Request{Cmd: "begin", Blocking: raw.blocking, Trace: raw.trace}
}

// wallclockRequest is the wall-clock window's begin. The sampler has a
// window of its own: each of its samples stops the world to walk every
// goroutine, and in the trace's window those pauses would be the
// requests' time.
func (s *session) wallclockRequest(raw *rawFiles) (wire.Request, error) {
	if !slices.Contains(s.hello.Counters, "wallclock") {
		return wire.Request{}, fmt.Errorf("the wall-clock profiler is not built into the target")
	}
	raw.wallclock = filepath.Join(s.priv, "wallclock.json")
	if s.cfg.FgprofOnly {
		raw.wallclock, raw.wallclockPprof = filepath.Join(s.priv, "wallclock.pprof"), true
	}
	return wire.Request{Cmd: "begin", Counters: map[string]string{"wallclock": raw.wallclock}}, nil
}

// measure opens the window: begin (snapshot 1), load, end (snapshot 2).
// Process counters are read after begin returns and before end is sent,
// so the agent's own work falls outside the window.
func (s *session) measure(ctx context.Context, begin wire.Request, d time.Duration, stacks bool) (*windowResult, error) {
	p, ac, drv, sc := s.p, s.ac, s.drv, s.sc
	r0, err := ac.call(begin)
	if err != nil {
		return nil, err
	}
	var sys0 map[int]uint64
	var st0 map[syscalls.StackKey]uint64
	if sc != nil {
		if stacks {
			if err := sc.c.SetStacks(true); err != nil {
				return nil, fmt.Errorf("syscall stacks: %w", err)
			}
			if st0, err = sc.c.StackCounts(); err != nil {
				return nil, fmt.Errorf("syscall stacks: %w", err)
			}
		}
		if sys0, err = sc.c.Counts(); err != nil {
			return nil, fmt.Errorf("syscalls: %w", err)
		}
	}
	cpu0, err0 := proc.ReadCPU(p.Pid)
	kids0 := proc.DescendantsCPU(p.Pid)
	io0, ioErr0 := proc.ReadIO(p.Pid)
	udp0, _ := proc.UDPCounters()
	drv0, mach0 := selfCPU(), proc.ReadMachine()
	lctx, stop := whileAlive(ctx, p)
	tags := tagsFor(drv, begin)
	lr, lerr := drv.Run(lctx, d)
	stop()
	latencies := tags()
	drv1, mach1 := selfCPU(), proc.ReadMachine()
	cpu1, err1 := proc.ReadCPU(p.Pid)
	kids1 := proc.DescendantsCPU(p.Pid)
	io1, ioErr1 := proc.ReadIO(p.Pid)
	udp1, _ := proc.UDPCounters()
	var sys1 map[int]uint64
	var st1 map[syscalls.StackKey]uint64
	if sc != nil {
		if sys1, err = sc.c.Counts(); err != nil {
			return nil, fmt.Errorf("syscalls: %w", err)
		}
		if stacks {
			if st1, err = sc.c.StackCounts(); err != nil {
				return nil, fmt.Errorf("syscall stacks: %w", err)
			}
			if err := sc.c.SetStacks(false); err != nil {
				return nil, fmt.Errorf("syscall stacks: %w", err)
			}
		}
	}
	if p.Exited() {
		return nil, fmt.Errorf("target exited during the window: %s", p.ExitStatus())
	}
	if lerr != nil {
		return nil, lerr
	}
	r1, err := ac.call(wire.Request{Cmd: "end"})
	if err != nil {
		return nil, err
	}
	if err := errors.Join(err0, err1); err != nil {
		if cpu0, cpu1, err = agentCPU(r0.Metrics, r1.Metrics); err != nil {
			return nil, fmt.Errorf("reading target cpu time: %w", errors.Join(err0, err1, err))
		}
	}
	w := &windowResult{load: lr, io0: io0, io1: io1, ioOK: ioErr0 == nil && ioErr1 == nil, m0: r0.Metrics, m1: r1.Metrics, cpuSource: cpu1.Source, udp: proc.CounterDelta(udp0, udp1), tags: latencies}
	if drv1 > drv0 {
		w.driverCPU = drv1 - drv0
	}
	if kids1 > kids0 {
		w.childCPU = kids1 - kids0
	}
	if lr != nil {
		w.machine = mach1.Since(mach0, lr.Elapsed.Seconds())
	}
	if sc != nil {
		w.sys = syscalls.Delta(sys0, sys1)
		if stacks {
			w.sysSites = sc.c.Sites(st0, st1, sc.sym)
		}
	}
	if cpu1.Nanos >= cpu0.Nanos && cpu0.Source == cpu1.Source {
		w.cpu = cpu1.Nanos - cpu0.Nanos
		if cpu1.WaitNanos >= cpu0.WaitNanos {
			w.runqWait = cpu1.WaitNanos - cpu0.WaitNanos
		}
	}
	return w, nil
}

// tagsFor turns the driver's keyed latencies on for a window with bills,
// so that each bill can be joined to the driver's latency for its
// request, and returns what turns them off and reads them at the
// window's end (nothing for a driver that does not key them).
func tagsFor(drv load.Driver, begin wire.Request) func() []load.Tag {
	tg, ok := drv.(load.Tagger)
	if !ok || begin.BillEvery == 0 {
		return func() []load.Tag { return nil }
	}
	tg.Tagging(true)
	return func() []load.Tag {
		tg.Tagging(false)
		return tg.Tags()
	}
}

// agentCPU is the target's CPU time at the window's two snapshots as its
// agent read it (getrusage), where /proc is not at hand (macOS): the
// snapshots' own work is in it.
func agentCPU(m0, m1 *wire.Metrics) (proc.CPUReading, proc.CPUReading, error) {
	if runtime.GOOS == "linux" || m0 == nil || m1 == nil || m1.CPUNanos == 0 {
		return proc.CPUReading{}, proc.CPUReading{}, errors.New("the agent reported no CPU time")
	}
	return proc.CPUReading{Nanos: m0.CPUNanos, Source: "agent-getrusage"}, proc.CPUReading{Nanos: m1.CPUNanos, Source: "agent-getrusage"}, nil
}

// selfCPU is this process's CPU time (user and system, every thread) in
// nanoseconds: the load driver's, while it runs a window.
func selfCPU() uint64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return uint64(ru.Utime.Nano() + ru.Stime.Nano())
}
