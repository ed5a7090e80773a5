package probe

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
	"github.com/perfspy/perfspy/syscalls"

	"github.com/perfspy/perfspy/internal/cmdmain"

	"github.com/perfspy/perfspy/internal/proc"

	"github.com/perfspy/perfspy/internal/withagent"
)

// Sources of each figure, as summary.json names them (package schema's).
const (
	SourceAllocsHeap    = schema.SourceAllocsHeap
	SourceSyscallsIO    = schema.SourceSyscallsIO
	SourceNone          = schema.SourceNone
	SourceAllocspy      = schema.SourceAllocspy
	SourceCopiesOverlay = schema.SourceCopiesOverlay
	SourceRoutes        = schema.SourceRoutes
	minServerCoreFrac   = 0.9
)

// rawFiles are what the agent wrote in the private folder; a path is ""
// when that figure was not measured.
type rawFiles struct {
	cpu, heap, allocs, copies  string
	routes                     string // requests per route in the attribution window
	bills                      string // each request's own allocations in the attribution window
	trace, blocking, wallclock string
	wallclockPprof             bool   // wallclock is fgprof's pprof file, not the agent's report
	retained                   string // the retained window's heap profiles and goroutine dumps
}

// windows are the windows a run measured; attr is clean in a timing-only
// run, copies is attr unless copies had a window of their own, off is nil
// without -offcpu.
type windows struct {
	clean, attr, copies, off *windowResult
	wall                     *windowResult    // the wall-clock profile's, nil without it
	retained                 *windowResult    // what requests leave behind, nil without it
	endpoints                []endpointWindow // each request of a request file alone
}

// runOutput is what a run measured, on its way to the results folder: the
// steps below fill the summary and the files in memory, and persist
// writes them once.
type runOutput struct {
	ses     *session // what measured: the target, its agent, the driver
	win     windows
	raw     rawFiles
	reasons []string // what makes the counts not judged: the windows', and what the steps add (addReason)
	timing  []string // what makes only the timings not judged: the session's (pinning), the pace, the machine
	judged  bool     // the verdict is given: a reason now would be lost
	floor   *schema.Summary

	s     *schema.Summary
	files map[string][]byte // the results folder's files, by name
	rep   report.Run
	// The attribution window's routes and its profiles, routes labelled.
	routeRep               *wire.RouteReport
	allocsProf, copiesProf *profile.Profile
	allocRep               *wire.AllocReport // allocspy's report of the attribution window
	copyRep                *wire.CopyReport  // copyspy's, when it counted in the attribution window
}

// writeResults turns the windows into the results folder: summarize,
// attribute, judge, render, persist.
func writeResults(o *runOutput) (*Result, error) {
	o.files = map[string][]byte{}
	o.summarize()
	o.reasons = append(o.reasons, windowReasons(o.named(), o.minRequests())...)
	o.timing = append(o.timing, o.timingReasons()...)
	// The steps before judge may add reasons; those after it may not
	// (addReason fails the run rather than lose one).
	steps := []func() error{o.allocations, o.copies, o.retained, o.routes, o.judge, o.offCPU, o.bills, o.syscallsAndCPU, o.endpoints, o.mixCheck, o.flames, o.render}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	res := &Result{Dir: o.ses.out, Summary: o.s, Sites: o.rep.Sites, CopySites: o.rep.CopySites}
	// On a full disk the verdict is still the caller's to print, with
	// what was written.
	return res, writeFiles(o.ses.out, o.files)
}

// comments are the profile comments of window w.
func (o *runOutput) comments(w *windowResult) []string {
	return windowComments(w.load.OK, w.load.Elapsed.Seconds(), o.ses.cfg.Target, o.ses.commit)
}

// addProfile encodes p into the results as name.
func (o *runOutput) addProfile(name string, p *profile.Profile) error {
	b, err := encodeProfile(p)
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	o.files[name] = b
	return nil
}

// summarize makes the summary of the timing window: requests, latency,
// CPU and syscalls per request.
func (o *runOutput) summarize() {
	clean := o.win.clean
	cl := clean.load
	secs := cl.Elapsed.Seconds()
	s := &schema.Summary{
		Schema: SummarySchema, Target: o.ses.cfg.Target, Commit: o.ses.commit, Go: o.ses.tgt.GoVersion, GOARCH: o.ses.tgt.GOARCH, Exec: strings.Join(o.ses.cfg.Exec, " "), Build: o.ses.tgt.BuildCheck,
		Window: schema.WindowSummary{
			Seconds: round(secs, 3), Requests: cl.OK, Errors: cl.Errors, Non2xx: cl.Non2xx, Dials: cl.Dials,
			RPS:       round(cl.RPS(), 1),
			LatencyUS: map[string]int64{"p50": cl.Percentile(50), "p99": cl.Percentile(99), "p999": cl.Percentile(99.9)},
		},
		AttributionWindow: *windowSummary(o.win.attr),
		CoresAvailable:    o.ses.coresHad,
		GOMAXPROCS:        o.ses.hello.GOMAXPROCS,
		ServerCPUs:        o.ses.plan.Server,
		DriverCPUs:        o.ses.plan.Load,
		PerRequest:        schema.PerRequest{SyscallsByName: map[string]float64{}},
		Sources: map[string]string{
			"allocs": SourceAllocsHeap, "copies": SourceNone, "syscalls": SourceSyscallsIO,
			"offcpu": SourceNone, "cpu": clean.cpuSource,
		},
		Files:  map[string]string{},
		Checks: map[string]float64{},
	}
	o.s = s
	if a := cl.Arrivals; a.Open() {
		w := &s.Window
		w.Rate, w.Arrivals = a.Rate, "constant"
		if a.Poisson {
			w.Arrivals = "poisson"
		}
		raw := &load.Result{Latency: cl.RawLatency}
		w.LatencyRawUS = map[string]int64{"p50": raw.Percentile(50), "p99": raw.Percentile(99), "p999": raw.Percentile(99.9)}
		w.ScheduledSends, w.LateSends, w.DroppedSends = cl.Scheduled, cl.Late, cl.Dropped
	}
	if len(o.ses.cfg.Exec) > 0 {
		s.Sources["cpu"] += " of " + o.ses.cfg.Exec[0] + " (-exec: the emulator's CPU time, not the program's on its machine)"
	}
	if secs > 0 {
		s.ServerCores = round(float64(clean.cpu)/1e9/secs, 3)
		s.Machine = machineSummary(clean, s.ServerCores, float64(clean.driverCPU)/1e9/secs, secs)
		s.Driver = &schema.DriverSummary{Name: o.ses.cfg.Spec.DriverName(load.Endpoint(o.ses.addr)), CoresUsed: round(float64(clean.driverCPU)/1e9/secs, 3), Source: "getrusage", TLS: o.ses.cfg.Spec.TLSNote()}
	}
	if cl.OK == 0 {
		return
	}
	if s.Driver != nil {
		s.Driver.CPUUS = round(float64(clean.driverCPU)/1e3/float64(cl.OK), 3)
	}
	n := float64(cl.OK)
	s.PerRequest.CPUUS = f64(round(float64(clean.cpu)/1e3/n, 3))
	if clean.sys != nil {
		var total uint64
		for id, c := range clean.sys {
			total += c
			s.PerRequest.SyscallsByName[syscalls.Name(id)] = round(float64(c)/n, 6)
		}
		s.PerRequest.Syscalls = f64(round(float64(total)/n, 4))
		s.Sources["syscalls"] = syscalls.Source
	} else if o.ses.noSyscalls != "" {
		s.PerRequest.Syscalls = nil
		s.Sources["syscalls"] = "none: " + o.ses.noSyscalls
	} else if !clean.ioOK {
		// Neither eBPF nor /proc/PID/io (macOS): no figure, said.
		s.PerRequest.Syscalls = nil
		s.Sources["syscalls"] = "none: not available on this platform (" + runtime.GOOS + ": no eBPF, no /proc/PID/io)"
	} else {
		sc := float64((clean.io1.SysR - clean.io0.SysR) + (clean.io1.SysW - clean.io0.SysW))
		s.PerRequest.Syscalls = f64(round(sc/n, 4))
		if o.ses.sysNote != "" {
			s.Sources["syscalls"] = SourceSyscallsIO + " (eBPF unavailable: " + o.ses.sysNote + ")"
		}
	}
	if clean.m0 != nil && clean.m1 != nil {
		s.Checks["metrics_allocs_per_req_timing_window"] = round(float64(clean.m1.AllocObjects-clean.m0.AllocObjects)/n, 4)
		if g0, g1 := clean.m0.GoroutinesCreated, clean.m1.GoroutinesCreated; g0 != nil && g1 != nil {
			s.PerRequest.GoroutinesCreated, s.Sources["goroutines_created"] = f64(round(float64(*g1-*g0)/n, 4)), "runtime-metrics (/sched/goroutines-created)"
		}
	}
	if cl.Datagrams > 0 {
		bulkFigures(s, clean, o.ses.cfg.Size)
	}
}

// minRequests is -min-requests, 100 by default: the fewest successes a
// window's figures are judged on.
func (o *runOutput) minRequests() int64 {
	if o.ses != nil && o.ses.cfg.MinRequests > 0 {
		return int64(o.ses.cfg.MinRequests)
	}
	return 100
}

// timingReasons are what makes the timings alone unfit for a verdict: an
// open-loop driver that did not hold its rate, a busy machine, a server
// that did not use its cores.
func (o *runOutput) timingReasons() []string {
	named := o.named()
	var reasons []string
	if a := o.ses.cfg.Arrivals; a.Open() {
		// Open-loop load is judged by whether the driver held its rate,
		// not by the server's cores: a rate below the server's capacity
		// leaves them idle by design.
		for _, w := range named {
			if w.w == nil || w.w.load == nil {
				continue
			}
			if held, why := w.w.load.Held(); !held {
				reasons = append(reasons, w.name+": "+why)
			}
		}
		if why := o.busyOpenLoop(); why != "" {
			reasons = append(reasons, why)
		}
		return reasons
	}
	if o.ses.coresHad > 0 && o.targetCores() < minServerCoreFrac*o.ses.coresHad {
		reasons = append(reasons, o.paceReason())
	}
	return reasons
}

// BusyMachineWait is the run-queue wait of the target's or the load
// driver's threads, in seconds per second of the window, past which a
// server that did not use its cores is said to share a busy machine: on
// an idle one they wait a few hundredths (0.6 to 2.1 on a busy one).
const BusyMachineWait = 0.2

// BusyOtherCores is the CPU other processes used, in cores, below which
// the waits for a CPU are the target's and the driver's own (their
// threads contending for the CPUs they were given: the lean driver's 0.35
// s per second on its one core, closed loop, idle machine), not a busy
// machine's. Measured: 0 to 0.19 on an idle machine, 0.89 beside one
// CPU-bound process, 1.74 to 1.96 beside two.
const BusyOtherCores = 0.5

// machineSummary is what the machine did in window w; serverCores and
// driverCores are the target's and the driver's CPU in it.
func machineSummary(w *windowResult, serverCores, driverCores, secs float64) *schema.MachineSummary {
	if secs <= 0 {
		return nil
	}
	// The target's own child processes are its work: never "other
	// processes" that make the machine busy.
	childCores := float64(w.childCPU) / 1e9 / secs
	m := &schema.MachineSummary{
		ServerRunQueueWait: round(float64(w.runqWait)/1e9/secs, 3),
		DriverRunQueueWait: round(w.machine.DriverWait, 3),
		OtherCores:         round(max(w.machine.BusyCores-serverCores-driverCores-childCores, 0), 2),
		TargetChildCores:   round(childCores, 2),
		Source:             "schedstat, /proc/stat",
	}
	if w.machine.Pressure >= 0 {
		m.CPUPressure = f64(round(w.machine.Pressure, 3))
		m.Source += ", /proc/pressure/cpu"
	}
	m.Busy = m.OtherCores >= BusyOtherCores && (m.ServerRunQueueWait >= BusyMachineWait || m.DriverRunQueueWait >= BusyMachineWait)
	return m
}

// OpenLoopWaitUS is the wait for a CPU per request, in µs, of the target's
// or the load driver's threads, past which (and past half the process's
// own CPU per request) an open-loop run's latencies are the machine's, not
// the server's: a latency from the intended send holds every such wait.
// Measured on targets/floor from 100 to 8,000 req/s: 12 to 80 µs a request
// on an idle machine, 208 to 1,410 with two CPU-bound processes on the
// target's and the driver's CPUs.
const OpenLoopWaitUS = 150

// busyOpenLoop says why an open-loop run's latencies cannot be judged
// when the target or the driver waited for a CPU: "" when neither did.
// Under -rate the target is idle by design, so the waits per second that
// make a closed-loop run not judged stay small at low rates: the waits per
// request tell, when other processes used the machine.
func (o *runOutput) busyOpenLoop() string {
	m, d, rps := o.s.Machine, o.s.Driver, o.s.Window.RPS
	// Waits per request from fewer requests than a window is judged on
	// (-rate 0.5: 2) say nothing; the window's own reason says it is
	// too short.
	if m == nil || rps <= 0 || o.s.Window.Requests < o.minRequests() {
		return ""
	}
	serverUS, driverUS := m.ServerRunQueueWait/rps*1e6, m.DriverRunQueueWait/rps*1e6
	waited := func(us float64, cpu *float64) bool {
		return us >= OpenLoopWaitUS && (cpu == nil || us >= *cpu/2)
	}
	var driverCPU *float64
	if d != nil {
		driverCPU = &d.CPUUS
	}
	// Waits with no other process at work are the target's own threads
	// contending for its cores (a server property, judged as such).
	if m.OtherCores < BusyOtherCores || !m.Busy && !waited(serverUS, o.s.PerRequest.CPUUS) && !waited(driverUS, driverCPU) {
		return ""
	}
	return fmt.Sprintf("the latencies are the machine's: the target waited for a CPU %.0f µs a request, the load driver %.0f µs (%s); a latency from the intended send holds those waits. The counts stand; run where nothing else runs, or give probe CPUs no other work uses (-cpus)",
		serverUS, driverUS, busyLine(m))
}

// busyLine says how busy the machine was.
func busyLine(m *schema.MachineSummary) string {
	s := fmt.Sprintf("the machine was busy, not the server: the target waited %.2f s per second for a CPU, the load driver %.2f; other processes used %.2f cores", m.ServerRunQueueWait, m.DriverRunQueueWait, m.OtherCores)
	if m.CPUPressure != nil {
		s += fmt.Sprintf(", and some task waited for a CPU %.0f%% of the time", *m.CPUPressure*100)
	}
	return s
}

// targetCores is the cores the target used with its own child processes
// (they run on the cores it was given).
func (o *runOutput) targetCores() float64 {
	c := o.s.ServerCores
	if m := o.s.Machine; m != nil {
		c += m.TargetChildCores
	}
	return c
}

// paceReason says why a server that did not use its cores was not judged:
// the driver set the pace when it was busy itself; when it was not, the
// server waited (on a sleep, a lock, a backend) with too few requests in
// flight to keep it busy.
func (o *runOutput) paceReason() string {
	why := fmt.Sprintf("the target used %.2f of its %.0f cores (< %.0f%%)", o.targetCores(), o.ses.coresHad, minServerCoreFrac*100)
	d, cpu := o.s.Driver, o.s.PerRequest.CPUUS
	if d == nil || cpu == nil {
		return why + ": the load driver, not the server, set the pace"
	}
	figures := fmt.Sprintf("driver %s %.2f µs/req on %.2f cores, server %.2f µs/req", d.Name, d.CPUUS, d.CoresUsed, *cpu)
	if m := o.s.Machine; m != nil && m.Busy {
		return fmt.Sprintf("%s: %s (%s); run where nothing else runs, or give probe CPUs no other work uses (-cpus)", why, busyLine(m), figures)
	}
	loadCores := float64(len(o.ses.plan.Load))
	if loadCores == 0 {
		loadCores = float64(runtime.NumCPU())
	}
	if want := o.ses.cfg.Duration.Seconds(); want > 0 && o.s.Window.Seconds > 1.5*want {
		return fmt.Sprintf("%s, and the window took %.1f s for -duration %v (%s): the driver spent it opening connections; lower -conns", why, o.s.Window.Seconds, o.ses.cfg.Duration, figures)
	}
	if d.CoresUsed < minServerCoreFrac*loadCores {
		advice := "raise -conns"
		if o.ses.cfg.Conns >= load.MaxConns {
			advice = fmt.Sprintf("-conns is at its most (%d)", load.MaxConns)
		}
		return fmt.Sprintf("%s, and the load driver was not busy either (%s): the server waits on something with too few requests in flight; %s", why, figures, advice)
	}
	return fmt.Sprintf("%s: the load driver, not the server, set the pace (%s)", why, figures)
}

// allocations: allocspy's table, or the exact heap profile delta of the
// attribution window; with both (the tests' cross-check), allocspy's goes
// to allocs.pb.gz and the heap profile's beside it.
func (o *runOutput) allocations() error {
	s, attr, raw := o.s, o.win.attr, o.raw
	var allocs *profile.Profile
	if raw.heap != "" {
		hp, err := heapProfileDelta(raw.heap)
		if err != nil {
			return err
		}
		hp.Comments = o.comments(attr)
		allocs = hp
		if raw.allocs != "" {
			if err := o.addProfile("allocs-heapprofile.pb.gz", hp); err != nil {
				return err
			}
			s.Files["allocs_heapprofile"] = "allocs-heapprofile.pb.gz"
		}
	}
	if raw.allocs != "" {
		rep, err := allocspy.ReadReport(raw.allocs)
		if err != nil {
			return fmt.Errorf("allocs: %w", err)
		}
		o.allocRep = rep
		allocs = allocspy.Profile(rep)
		allocs.Comments = o.comments(attr)
		if err := o.readRoutes(); err != nil {
			return err
		}
		o.routeLabels(allocs)
		if err := o.allocspyFigures(rep); err != nil {
			return err
		}
	} else if o.ses.tgt.AllocsOff != "" {
		s.Sources["allocs"] = SourceAllocsHeap + " (allocspy unavailable: " + o.ses.tgt.AllocsOff + ")"
	}
	if allocs == nil {
		return nil
	}
	if raw.allocs != "" {
		o.allocsProf = allocs
	}
	if err := o.addProfile("allocs.pb.gz", allocs); err != nil {
		return err
	}
	s.Files["allocs"] = "allocs.pb.gz"
	o.rep.Totals, o.rep.Sites, o.rep.Requests = totals(allocs), topSites(allocs, 0), attr.load.OK
	if n := float64(attr.load.OK); n > 0 {
		s.PerRequest.Allocs = f64(round(float64(o.rep.Totals[0])/n, 4))
		s.PerRequest.AllocBytes = f64(round(float64(o.rep.Totals[1])/n, 2))
		if attr.m0 != nil && attr.m1 != nil {
			s.Checks["metrics_allocs_per_req_attribution_window"] = round(float64(attr.m1.AllocObjects-attr.m0.AllocObjects)/n, 4)
		}
	}
	return nil
}

// allocspyFigures are the figures only allocspy's report has.
func (o *runOutput) allocspyFigures(rep *wire.AllocReport) error {
	s := o.s
	s.Sources["allocs"] = SourceAllocspy
	objects, _, blocks, reqBytes := allocspy.Totals(rep)
	if n := float64(o.win.attr.load.OK); n > 0 {
		s.PerRequest.AllocBlocks = f64(round(float64(blocks)/n, 4))
		s.PerRequest.AllocRequestedBytes = f64(round(float64(reqBytes)/n, 2))
		s.Checks["allocspy_tiny_objects_per_req"] = round(float64(objects-blocks)/n, 4)
	}
	s.Checks["allocs_dropped"] = float64(rep.Dropped)
	if rep.Dropped > 0 {
		if err := o.addReason(fmt.Sprintf("allocspy's table was full: %d allocations were not counted", rep.Dropped)); err != nil {
			return err
		}
	}
	c := allocsClosure(rep)
	if c == nil {
		return nil
	}
	if s.Closure == nil {
		s.Closure = &schema.Closure{}
	}
	s.Closure.Allocs = c
	if !c.Closed {
		s.Sources["allocs"] = SourceAllocspy + " (not exact: see closure.allocs)"
		return o.addReason(fmt.Sprintf("allocations do not close on the runtime's own count: the runtime made %d objects (%d B) in the attribution window, allocspy counted %d (%d B) with the agent's and the dropped: %d objects (%d B) missed, an allocation path of %s this overlay does not patch",
			c.RuntimeObjects, c.RuntimeBytes, c.RuntimeObjects-c.MissedObjects, c.RuntimeBytes-c.MissedBytes, c.MissedObjects, c.MissedBytes, o.ses.tgt.GoVersion))
	}
	return nil
}

// copies: copyspy's table of the attribution window, or of the copies'
// own window.
func (o *runOutput) copies() error {
	s, cw := o.s, o.win.copies
	if o.raw.copies == "" {
		if o.ses.tgt.CopiesOff != "" {
			s.Sources["copies"] = SourceNone + ": " + o.ses.tgt.CopiesOff
		}
		return nil
	}
	rep, err := copyspy.ReadReport(o.raw.copies)
	if err != nil {
		return fmt.Errorf("copies: %w", err)
	}
	cp := copyspy.Profile(rep)
	cp.Comments = append(o.comments(cw), cp.Comments...)
	if cw == o.win.attr {
		if err := o.readRoutes(); err != nil {
			return err
		}
		o.routeLabels(cp)
		o.copiesProf = cp
		o.copyRep = rep
	}
	if cw != o.win.attr {
		s.CopiesWindow = windowSummary(cw)
	}
	if err := o.addProfile("copies.pb.gz", cp); err != nil {
		return err
	}
	s.Files["copies"] = "copies.pb.gz"
	s.Sources["copies"] = SourceCopiesOverlay
	o.rep.CopySites = copyspy.Sites(rep)
	var moved, cleared [2]int64 // calls, bytes of memmove and of memclr
	for i := range o.rep.CopySites {
		st := &o.rep.CopySites[i]
		o.rep.CopyTotal[0] += st.TotalCalls()
		o.rep.CopyTotal[1] += st.TotalBytes()
		k := &moved
		if st.Kind == "memclr" {
			k = &cleared
		}
		k[0] += st.TotalCalls()
		k[1] += st.TotalBytes()
	}
	o.rep.CopyRequests = cw.load.OK
	if n := float64(cw.load.OK); n > 0 {
		s.PerRequest.CopyCalls = f64(round(float64(moved[0])/n, 4))
		s.PerRequest.CopiedBytes = f64(round(float64(moved[1])/n, 2))
		s.PerRequest.ClearCalls = f64(round(float64(cleared[0])/n, 4))
		s.PerRequest.ClearedBytes = f64(round(float64(cleared[1])/n, 2))
	}
	s.Checks["copies_dropped"] = float64(rep.Dropped)
	if rep.Dropped > 0 {
		return o.addReason(fmt.Sprintf("copyspy's table was full: %d copies were not counted", rep.Dropped))
	}
	return nil
}

// addReason adds a reason the run cannot be judged; after the verdict it
// is an error (a step out of order), never a reason silently lost.
func (o *runOutput) addReason(r string) error {
	if o.judged {
		return fmt.Errorf("a reason came after the verdict (a step runs after judge that must run before it): %s", r)
	}
	o.reasons = append(o.reasons, r)
	return nil
}

// named are the run's windows, named as the reasons name them.
func (o *runOutput) named() []namedWindow {
	return []namedWindow{{"timing window", o.win.clean}, {"attribution window", o.win.attr}, {"copy window", o.win.copies}, {"off-CPU window", o.win.off}, {"wall-clock window", o.win.wall}}
}

// judge gives the verdict: server-bound, or not judged with the reasons,
// the counts' first, then the timings'.
func (o *runOutput) judge() error {
	o.judged = true
	o.s.Judged = &schema.Judged{Counts: len(o.reasons) == 0, Timing: len(o.timing) == 0, TimingReasons: o.timing}
	o.reasons = append(o.reasons, o.timing...)
	o.s.Reasons = o.reasons
	o.s.Verdict = VerdictServerBound
	if o.ses != nil && o.ses.cfg.Arrivals.Open() {
		o.s.Verdict = VerdictRateHeld
	}
	if len(o.reasons) > 0 {
		o.s.Verdict = VerdictNotJudged
	}
	return nil
}

// offCPU: the wall-clock window's profile, and the off-CPU window's trace,
// block and mutex files.
func (o *runOutput) offCPU() error {
	if o.win.wall != nil {
		if err := o.writeWallclock(o.win.wall); err != nil {
			return err
		}
	}
	if o.win.off == nil {
		return nil
	}
	if err := o.writeOffCPU(o.win.off); err != nil {
		return err
	}
	if o.s.PerRequest.OffCPUUS == nil && o.ses.tgt.RequestsOff != "" {
		o.s.Sources["offcpu"] = SourceNone + ": no request boundaries: " + o.ses.tgt.RequestsOff
	}
	return nil
}

// syscallsAndCPU: the syscall stacks (the off-CPU window's, else the
// attribution window's) and the timing window's CPU profile.
func (o *runOutput) syscallsAndCPU() error {
	sysWin := o.win.attr
	if o.win.off != nil {
		sysWin = o.win.off
	}
	if sysWin.sysSites != nil {
		sp := syscalls.Profile(targetSites(sysWin.sysSites))
		sp.Comments = o.comments(sysWin)
		if err := o.addProfile("syscalls.pb.gz", sp); err != nil {
			return err
		}
		o.s.Files["syscalls"] = "syscalls.pb.gz"
	}
	cpuProf, err := profileFromFile(o.raw.cpu)
	if err != nil {
		return err
	}
	cpuProf.Comments = o.comments(o.win.clean)
	o.cpuProfileCoverage(cpuProf)
	if err := o.addProfile("cpu.pb.gz", cpuProf); err != nil {
		return err
	}
	for k, v := range map[string]string{"cpu": "cpu.pb.gz", "bench": "bench.txt", "report": "report.md", "meta": "meta", "target_log": "target.log"} {
		o.s.Files[k] = v
	}
	return nil
}

// cpuProfileCoverage checks the CPU profile's total against the server's
// CPU time measured over the same window (checks.cpu_profile_coverage),
// and names the profile's source with it. SIGPROF comes from a per-thread
// CPU timer that the kernel checks at its tick, on the thread then
// running: a server whose requests run in bursts shorter than a tick on a
// machine whose other processes hold the CPUs at the tick loses most of
// its samples (4% kept with two CPU-bound processes beside
// targets/httpjson on two cores), while its CPU time stays exact.
func (o *runOutput) cpuProfileCoverage(p *profile.Profile) {
	measured := o.win.clean.cpu
	if measured <= 0 {
		return
	}
	idx := len(p.SampleType) - 1 // runtime/pprof: samples, then cpu nanoseconds
	if idx < 0 || p.SampleType[idx].Unit != "nanoseconds" {
		return
	}
	var sampled int64
	for _, s := range p.Sample {
		sampled += s.Value[idx]
	}
	cov := float64(sampled) / float64(measured)
	o.s.Checks["cpu_profile_coverage"] = round(cov, 3)
	src := fmt.Sprintf("runtime/pprof (SIGPROF, 100 Hz): %.0f%% of the server's measured CPU", 100*cov)
	if cov < report.LowCPUProfileCoverage {
		src += "; samples lost to a busy machine (the CPU timer is checked at the kernel's tick, which other processes held): the profile's shape is a sample of a sample, per_request.cpu_us stays exact"
	}
	o.s.Sources["cpu_profile"] = src
}

// flames draws a flame page of each profile, from the encoded profiles in
// memory.
func (o *runOutput) flames() error {
	return addFlames(o.files, o.s)
}

// render writes summary.json, bench.txt, report.md and meta, with the
// floor's figures when one was measured.
func (o *runOutput) render() error {
	s := o.s
	if o.floor != nil && o.floor.PerRequest.CPUUS != nil {
		f := &schema.FloorSummary{Target: "targets/" + filepath.Base(o.floor.Target), CPUUS: *o.floor.PerRequest.CPUUS, RPS: o.floor.Window.RPS, Verdict: o.floor.Verdict}
		if s.PerRequest.CPUUS != nil && f.CPUUS > 0 {
			f.CPURatio = round(*s.PerRequest.CPUUS/f.CPUUS, 3)
		}
		s.Floor = f
		s.FloorRatio = floorRatios(s, o.floor)
	}
	meta := collectMeta(o.ses.cfg, o.ses.tgt, o.ses.commit, o.ses.hello, o.ses.plan, o.ses.allowed)
	var buf bytes.Buffer
	if err := report.JSON(&buf, s); err != nil {
		return err
	}
	o.files["summary.json"] = append([]byte(nil), buf.Bytes()...)
	buf.Reset()
	if err := report.RunBenchText(&buf, s, o.ses.tgt.Name, benchConfig(meta)); err != nil {
		return err
	}
	o.files["bench.txt"] = append([]byte(nil), buf.Bytes()...)
	buf.Reset()
	o.rep.Summary = s
	o.rep.Markdown(&buf)
	o.files["report.md"] = append([]byte(nil), buf.Bytes()...)
	o.files["meta"] = []byte(formatMeta(meta))
	return nil
}

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// collectMeta gathers the configuration a figure needs to be believed.
func collectMeta(cfg Config, tgt *withagent.Binary, commit string, hello *wire.Response, plan proc.CPUPlan, allowed []string) map[string]string {
	flags := cfg.Flags
	if flags == nil {
		flags = configFlags(cfg)
	}
	m := map[string]string{
		"goos":            runtime.GOOS,
		"goarch":          runtime.GOARCH,
		"pkg":             cfg.Target,
		"cpu":             cpuModel(),
		"go":              tgt.GoVersion,
		"target-go":       hello.GoVersion,
		"gomaxprocs":      fmt.Sprint(hello.GOMAXPROCS),
		"kernel":          kernelRelease(),
		"governor":        governor(),
		"commit":          commit,
		"dirty":           fmt.Sprint(tgt.Dirty),
		"ncpu":            fmt.Sprint(runtime.NumCPU()),
		"cpus-server":     schema.CPUList(plan.Server),
		"cpus-load":       schema.CPUList(plan.Load),
		"cpus-readback":   strings.Join(allowed, " "),
		"target-args":     strings.Join(RedactArgs(cfg.Args), " "),
		"flags":           strings.Join(flags, " "),
		"binary":          tgt.Binary,
		"perfspy-version": cmdmain.Version(),
	}
	if m["cpus-server"] == "" {
		m["cpus-server"] = "unpinned"
		m["cpus-load"] = "unpinned"
	}
	return m
}

// benchConfig picks the meta keys that belong in bench.txt's header.
func benchConfig(meta map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"goos", "goarch", "pkg", "cpu", "commit", "gomaxprocs", "kernel"} {
		if v := meta[k]; v != "" {
			out[k] = v
		}
	}
	return out
}

func formatMeta(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, m[k])
	}
	return b.String()
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func governor() string {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
	if err != nil {
		return "unknown (no cpufreq)"
	}
	return strings.TrimSpace(string(b))
}

// bulkFigures divides a bulk window's figures by its transfers and by
// their datagrams.
func bulkFigures(s *schema.Summary, w *windowResult, size int64) {
	cl := w.load
	n := float64(cl.OK)
	dpr := float64(cl.Datagrams) / n
	s.DatagramsPerRequest = f64(round(dpr, 3))
	t := &schema.TransferSummary{Bytes: size, BytesPerDatagram: round(float64(cl.DatagramBytes)/float64(cl.Datagrams), 1),
		LargestDatagram: cl.MaxDatagram, DatagramSource: cl.DatagramSource}
	pd := &schema.PerDatagram{SyscallsByName: map[string]float64{}}
	if s.PerRequest.CPUUS != nil {
		t.CPUUSPerMB = round(*s.PerRequest.CPUUS/(float64(size)/1e6), 3)
		pd.CPUUS = round(*s.PerRequest.CPUUS/dpr, 4)
	}
	if s.PerRequest.Syscalls != nil && *s.PerRequest.Syscalls > 0 {
		t.BytesPerSyscall = round(float64(cl.DatagramBytes)/n / *s.PerRequest.Syscalls, 1)
		pd.Syscalls = round(*s.PerRequest.Syscalls/dpr, 4)
	}
	for name, v := range s.PerRequest.SyscallsByName {
		pd.SyscallsByName[name] = round(v/dpr, 6)
	}
	if w.udp != nil {
		t.KernelUDP = map[string]float64{}
		for _, k := range []string{"InDatagrams", "OutDatagrams", "RcvbufErrors", "SndbufErrors", "InErrors"} {
			t.KernelUDP[k] = round(float64(w.udp[k])/n, 3)
		}
	}
	s.Transfer, s.PerDatagram = t, pd
}

// floorRatios sets the target's bulk figures against the UDP floor's.
func floorRatios(s, floor *schema.Summary) map[string]float64 {
	if s.DatagramsPerRequest == nil || floor.DatagramsPerRequest == nil {
		return nil
	}
	out := map[string]float64{}
	ratio := func(name string, a, b float64) {
		if b > 0 {
			out[name] = round(a/b, 3)
		}
	}
	if s.PerRequest.CPUUS != nil && floor.PerRequest.CPUUS != nil {
		ratio("cpu_us", *s.PerRequest.CPUUS, *floor.PerRequest.CPUUS)
	}
	if s.PerRequest.Syscalls != nil && floor.PerRequest.Syscalls != nil {
		ratio("syscalls", *s.PerRequest.Syscalls, *floor.PerRequest.Syscalls)
	}
	ratio("datagrams", *s.DatagramsPerRequest, *floor.DatagramsPerRequest)
	if s.PerDatagram != nil && floor.PerDatagram != nil {
		ratio("cpu_us_per_datagram", s.PerDatagram.CPUUS, floor.PerDatagram.CPUUS)
	}
	return out
}

// ErrIncomplete is a results folder not written whole (a full disk):
// the error names what was written and what was not.
var ErrIncomplete = errors.New("results incomplete")

// resultsFirst are the files written before any other, in this order:
// the verdict and the figures scripts read, then the rest smallest first,
// so that a disk that fills keeps the most.
var resultsFirst = []string{"summary.json", "meta", "report.md", "bench.txt"}

// writeResult writes one file of a results folder, its folder made; a
// file it could not write whole is removed (a partial file is no result).
func writeResult(dir, name string, b []byte) error {
	p := filepath.Join(dir, name)
	err := os.MkdirAll(filepath.Dir(p), 0o700)
	if err == nil {
		err = os.WriteFile(p, b, 0o600)
	}
	if err != nil {
		os.Remove(p)
	}
	return err
}

// writeFiles writes each file into dir, readable by the user alone
// (-results-mode opens the folder afterwards). A file that cannot be
// written whole is removed, and the error (ErrIncomplete) names it, the
// files written and those not.
//
// The files are written in order by writeWorkers at once (a -bench
// folder holds hundreds, and a file's creation, not its bytes, is most
// of the time); when one fails, those after it in the order that were
// written meanwhile are removed, so that what is left is what a write
// one at a time would have left.
func writeFiles(dir string, files map[string][]byte) error {
	names := slices.Sorted(maps.Keys(files))
	rank := func(n string) int {
		if i := slices.Index(resultsFirst, n); i >= 0 {
			return i
		}
		return len(resultsFirst)
	}
	slices.SortStableFunc(names, func(a, b string) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return cmp.Compare(len(files[a]), len(files[b]))
	})
	errs := make([]error, len(names))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(writeWorkers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(names) && !failed.Load(); i = int(next.Add(1) - 1) {
				if err := writeResult(dir, names[i], files[names[i]]); err != nil {
					errs[i] = err
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	i := slices.IndexFunc(errs, func(err error) bool { return err != nil })
	if i < 0 {
		return nil
	}
	for _, name := range names[i+1:] {
		os.Remove(filepath.Join(dir, name))
	}
	written := "nothing"
	if i > 0 {
		written = strings.Join(names[:i], ", ")
	}
	return fmt.Errorf("%w in %s: writing %s: %w; written: %s; not written: %s", ErrIncomplete, dir, names[i], errs[i], written, strings.Join(names[i:], ", "))
}

// writeWorkers is how many files writeFiles writes at once.
const writeWorkers = 4

type namedWindow struct {
	name string
	w    *windowResult
}

// windowReasons says why the windows cannot be judged: fewer than min
// successes in any of them (every window's count is then listed), or
// failed requests in one (a failed request's work is in its window's
// counts but not in the denominator, which counts successes only). A
// window listed twice (the attribution window of a timing-only run is the
// timing window) is named once; absent windows are nil.
func windowReasons(windows []namedWindow, min int64) []string {
	var out, counts []string
	few := false
	seen := map[*windowResult]bool{}
	for _, nw := range windows {
		if nw.w == nil || seen[nw.w] {
			continue
		}
		seen[nw.w] = true
		l := nw.w.load
		counts = append(counts, fmt.Sprintf("%d in the %s", l.OK, nw.name))
		few = few || l.OK < min
		if l.Errors+l.Non2xx > 0 {
			out = append(out, fmt.Sprintf("%d failed requests in the %s (first: %s)", l.Errors+l.Non2xx, nw.name, l.FirstErr))
		}
		if l.Abandoned > 0 {
			out = append(out, fmt.Sprintf("%d requests in flight at the %s's end had no answer %v after it and were abandoned (a request that never answers ends no window)", l.Abandoned, nw.name, l.Drain))
		}
	}
	if few {
		out = append([]string{fmt.Sprintf("too few successful requests (%s; need %d)", strings.Join(counts, ", "), min)}, out...)
	}
	return out
}

// applyResultsMode gives a finished results folder, and every folder and
// file in it, -results-mode (files without execute); 0 leaves them
// private (0700 and 0600).
func applyResultsMode(dir string, mode os.FileMode) error {
	if mode == 0 || mode == 0o700 {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(p, mode)
		case d.Type().IsRegular():
			return os.Chmod(p, mode&^0o111)
		}
		return nil
	})
}

// allocsClosure is rep's closure, nil when the report has no runtime
// count (a window that counted sampled requests only).
func allocsClosure(rep *wire.AllocReport) *schema.AllocsClosure {
	rc := rep.Closure
	if rc == nil {
		return nil
	}
	objects, bytes, _, _ := allocspy.Totals(rep)
	c := &schema.AllocsClosure{
		Objects: int64(objects), Bytes: int64(bytes),
		AgentObjects: int64(rc.AgentObjects), AgentBytes: int64(rc.AgentBytes),
		DroppedObjects: int64(rep.Dropped), DroppedBytes: int64(rc.DroppedBytes),
		RuntimeObjects: int64(rc.RuntimeObjects), RuntimeBytes: int64(rc.RuntimeBytes),
	}
	c.MissedObjects = c.RuntimeObjects - c.Objects - c.AgentObjects - c.DroppedObjects
	c.MissedBytes = c.RuntimeBytes - c.Bytes - c.AgentBytes - c.DroppedBytes
	c.Closed = c.MissedObjects == 0 && c.MissedBytes == 0
	return c
}
