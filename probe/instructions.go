package probe

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/callgrind"
	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/elfsym"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/report"

	"github.com/perfspy/perfspy/internal/proc"

	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/schema"
)

// SourceInstructions names the instruction counts' source.
const SourceInstructions = "callgrind"

// VerdictCountsOnly is the verdict of an instructions run: it measures no
// timing, and its counts do not depend on speed.
const VerdictCountsOnly = "counts-only"

// instructionsGap is the least pause before each request of an
// instructions window; the load then waits for every thread of the target
// to sleep and for sysmon to park (proc.ThreadsIdle). Under callgrind a request
// that arrives while the server is still finishing the last one takes
// another path through the scheduler (no park in the netpoller) than one
// that finds it idle; which of the two a request took depended on timing
// and moved the count by up to 3% per run, and a fixed pause was not
// enough on a loaded machine.
const instructionsGap = 2 * time.Millisecond

// runInstructions runs the target under callgrind: the target is built
// with -tags valgrind, warmed up, dumped, loaded with a count of requests,
// dumped again; the part between the two dumps is the window.
func runInstructions(ctx context.Context, cfg Config, plan proc.CPUPlan, logf func(string, ...any)) (*Result, error) {
	tools, err := capability.Tool("valgrind", "valgrind", "callgrind_control")
	if err != nil {
		return nil, fmt.Errorf("probe run -instructions: %w", err)
	}
	if cfg.Requests <= 0 {
		cfg.Requests = 2000
	}
	if cfg.ReadyTimeout < 2*time.Minute {
		cfg.ReadyTimeout = 2 * time.Minute // valgrind starts slowly
	}
	opts := withagent.BuildOptions{Tags: []string{"valgrind"}, Repeatable: true, Overlays: spyOverlays(seams{})}
	if cfg.Live {
		opts.Copies, opts.Allocs, opts.Requests, opts.Live = true, true, true, true
	}
	tgt, err := withagent.Build(ctx, cfg.Target, opts, logf)
	if err != nil {
		return nil, err
	}
	cr := &callgrindRun{valgrind: tools[0], control: tools[1]}
	// One connection: requests are served one after another, the same
	// path every time; no eBPF counter on valgrind.
	cfg.Conns, cfg.Syscalls = 1, "proc-io"
	cr.s = newSession(cfg, plan, tgt, logf)
	cr.s.wrap = cr.command
	// Killing valgrind before its last dump loses the symbol table.
	cr.s.grace = time.Minute
	defer cr.s.close()
	logf("starting %s under callgrind (about 50 times slower)", tgt.Binary)
	if err := cr.s.start(ctx); err != nil {
		return nil, err
	}
	lr, err := cr.window(ctx)
	if err != nil {
		return nil, err
	}
	win, err := cr.windowPart()
	if err != nil {
		return nil, err
	}
	if lr.OK == 0 || lr.Errors+lr.Non2xx > 0 {
		return nil, fmt.Errorf("the window had %d successes and %d failures (first: %s)", lr.OK, lr.Errors+lr.Non2xx, lr.FirstErr)
	}
	return cr.write(win, lr)
}

// callgrindRun is a session whose target runs under callgrind, on its way
// to instructions per request.
type callgrindRun struct {
	s                 *session
	valgrind, control string
	cgOut             string // callgrind's output, kept in the results
}

// command starts the target under callgrind, its output in the results
// folder (kcachegrind and callgrind_annotate read it). Callgrind asserts
// on the signals of Go's asynchronous preemption; GC cycles start at
// points that vary from run to run: without them, one binary's count
// repeats (GC cost is the timing windows' business). Valgrind does not
// know RDTSCP, which the runtime's cputicks runs when a runtime lock is
// contended long enough to sleep (lock2): SIGILL, seen under load;
// cpu.rdtscp=off makes cputicks fence and read RDTSC instead.
func (cr *callgrindRun) command(binary string, args []string) (string, []string, []string) {
	cr.cgOut = filepath.Join(cr.s.out, "callgrind.out")
	vargs := append([]string{"--tool=callgrind", "--combine-dumps=yes", "--dump-instr=yes", "--callgrind-out-file=" + cr.cgOut, binary}, args...)
	return cr.valgrind, vargs, []string{"GODEBUG=asyncpreemptoff=1,memprofilerate=0,cpu.rdtscp=off", "GOGC=off"}
}

// dump asks callgrind for a dump: the part between two dumps is a window.
func (cr *callgrindRun) dump(ctx context.Context) error {
	// callgrind_control waits for valgrind's answer, which a valgrind
	// that died (callgrind asserts on some signals) never gives: the wait
	// ends with the target, or after dumpTimeout.
	ctx, cancel := context.WithTimeout(ctx, dumpTimeout)
	defer cancel()
	go func() {
		select {
		case <-cr.s.p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	c := exec.CommandContext(ctx, cr.control, "-d", strconv.Itoa(cr.s.p.Pid))
	b, err := c.CombinedOutput()
	switch {
	case err == nil:
		return nil
	case cr.s.p.Exited():
		return fmt.Errorf("callgrind_control -d %d: the target ended: %s", cr.s.p.Pid, cr.s.p.ExitStatus())
	case ctx.Err() != nil:
		return fmt.Errorf("callgrind_control -d %d: no answer within %s", cr.s.p.Pid, dumpTimeout)
	}
	return fmt.Errorf("callgrind_control -d %d: %v: %s", cr.s.p.Pid, err, b)
}

// dumpTimeout bounds one dump of callgrind's counts.
var dumpTimeout = 2 * time.Minute

// window warms up, dumps, sends the window's requests one by one, each
// when every thread of the target sleeps, dumps again and stops the target.
func (cr *callgrindRun) window(ctx context.Context) (*load.Result, error) {
	s := cr.s
	warm := max(s.cfg.Requests/10, 50)
	s.logf("warm-up: %d requests", warm)
	if _, err := s.drv.RunN(ctx, warm); err != nil {
		return nil, err
	}
	if err := cr.dump(ctx); err != nil {
		return nil, err
	}
	s.logf("window: %d requests", s.cfg.Requests)
	lr, err := load.Paced(ctx, s.drv, s.cfg.Requests, instructionsGap, func() bool { return proc.ThreadsIdle(s.p.Pid) })
	if err != nil {
		return nil, err
	}
	if s.p.Exited() {
		return nil, fmt.Errorf("target exited during the window: %s", s.p.ExitStatus())
	}
	if err := cr.dump(ctx); err != nil {
		return nil, err
	}
	s.p.Stop()
	return lr, nil
}

// windowPart reads callgrind's output: the second dump's part holds the
// costs since the first, the window.
func (cr *callgrindRun) windowPart() (*callgrind.Part, error) {
	if err := os.Chmod(cr.cgOut, 0o644); err != nil { // callgrind makes it 0600
		return nil, fmt.Errorf("callgrind output: %w", err)
	}
	f, err := os.Open(cr.cgOut)
	if err != nil {
		return nil, fmt.Errorf("callgrind output: %w", err)
	}
	parts, err := callgrind.Parse(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	dumps := 0
	for _, pt := range parts {
		// Dumps asked for by callgrind_control say "dump" (older
		// releases "Client Request"); the last part is the exit's.
		if pt.Trigger != "" && !strings.HasPrefix(pt.Trigger, "Program termination") {
			dumps++
			if dumps == 2 {
				return pt, nil
			}
		}
	}
	return nil, fmt.Errorf("callgrind output has %d parts and %d client dumps; want the window's", len(parts), dumps)
}

// write makes the summary, the profile, bench.txt and report.md.
func (cr *callgrindRun) write(win *callgrind.Part, lr *load.Result) (*Result, error) {
	cfg, n, tgt := cr.s.cfg, lr.OK, cr.s.tgt
	// sysmon, the runtime's monitor thread, runs on a clock, not on
	// requests. The repeatable build keeps it asleep through the window,
	// but a timer that falls due wakes it: what it then costs follows the
	// wall time of the window, so it is left out of the figure and shown
	// apart, as is the scheduler's search for work (runtime.findRunnable
	// with what it calls), which stays in.
	idle := win.Inclusive("runtime.findRunnable")
	sysmon := win.Inclusive("runtime.sysmon")
	s := &schema.Summary{
		Schema: SummarySchema, Target: cfg.Target, Commit: cr.s.commit, Go: tgt.GoVersion, Build: tgt.BuildCheck,
		Window:  schema.WindowSummary{Seconds: round(lr.Elapsed.Seconds(), 3), Requests: n, RPS: round(lr.RPS(), 1), LatencyUS: map[string]int64{}},
		Verdict: VerdictCountsOnly,
		Reasons: []string{fmt.Sprintf("instructions under callgrind: the window is %d requests, not seconds; no timing is measured", cfg.Requests)},
		PerRequest: schema.PerRequest{
			Instructions:   f64(round(float64(win.Total-sysmon)/float64(n), 2)),
			SyscallsByName: map[string]float64{},
		},
		Checks: map[string]float64{
			"instructions_total_per_req":          round(float64(win.Total)/float64(n), 2),
			"instructions_scheduler_idle_per_req": round(float64(idle)/float64(n), 2),
			"instructions_sysmon_per_req":         round(float64(sysmon)/float64(n), 2),
		},
		Sources: map[string]string{"instructions": SourceInstructions, "allocs": SourceNone, "copies": SourceNone, "syscalls": SourceNone, "offcpu": SourceNone, "cpu": SourceNone},
		Files:   map[string]string{"instructions": "instructions.pb.gz", "callgrind": "callgrind.out", "bench": "bench.txt", "report": "report.md", "target_log": "target.log"},
	}
	pp := instructionsProfile(win, tgt.ModDir, tgt.Binary, nil)
	pp.Comments = windowComments(n, lr.Elapsed.Seconds(), cfg.Target, cr.s.commit)
	var prof, js, bench, rep bytes.Buffer
	if err := pp.Write(&prof); err != nil {
		return nil, err
	}
	if err := report.JSON(&js, s); err != nil {
		return nil, err
	}
	if err := report.RunBenchText(&bench, s, tgt.Name, nil); err != nil {
		return nil, err
	}
	report.Instructions(&rep, s, instructionCosts(win), n)
	files := map[string][]byte{"instructions.pb.gz": prof.Bytes(), "summary.json": js.Bytes(), "bench.txt": bench.Bytes(), "report.md": rep.Bytes()}
	if err := writeFiles(cr.s.out, files); err != nil {
		return nil, err
	}
	return &Result{Dir: cr.s.out, Summary: s}, nil
}

// instructionCosts are the window's functions as report.md lists them.
func instructionCosts(p *callgrind.Part) report.Costs {
	c := report.Costs{Total: p.Total}
	for _, row := range p.Top() {
		c.Rows = append(c.Rows, report.Cost{Func: row.Func, Cost: row.Cost, Bytes: callgrind.MemmoveClass(row.Func)})
	}
	return c
}

// instructionsProfile writes the window's exclusive costs by source
// line, each with the lines of the target module's own code (under
// modDir) that led to it: a sample is the instruction that ran, then,
// innermost first, each own line above it, with the function of another
// module (or the standard library) it called on the way (callgrind.Charges
// says how a function's cost is parted among the lines that called it).
// A cost no own line leads to is a sample of one frame. Each address is
// a location whose lines are the functions the compiler inlined there,
// from binary's DWARF (callgrind names inlined code by the function it
// was inlined into); without DWARF, the function callgrind names.
//
// root, when not nil, names the functions charged to nothing above them
// (a benchmark's: callgrind.Charges).
func instructionsProfile(p *callgrind.Part, modDir, binary string, root func(string) bool) *profile.Profile {
	prof := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "instructions", Unit: "count"}},
		PeriodType: &profile.ValueType{Type: "instructions", Unit: "count"},
		Period:     1,
	}
	inl := inlinesOf(binary) // nil: callgrind's names alone
	p = realCalls(p, inl)
	funcs := map[[2]string]*profile.Function{}
	fn := func(name, file string) *profile.Function {
		f := funcs[[2]string{name, file}]
		if f == nil {
			f = &profile.Function{ID: uint64(len(prof.Function) + 1), Name: name, SystemName: name, Filename: file}
			funcs[[2]string{name, file}] = f
			prof.Function = append(prof.Function, f)
		}
		return f
	}
	locs := map[callgrind.Line]*profile.Location{}
	loc := func(l callgrind.Line) *profile.Location {
		if x := locs[l]; x != nil {
			return x
		}
		// A function in another file (code inlined from it, when the
		// DWARF cannot say which) is a function entry of its own, so that
		// the line names its file.
		x := &profile.Location{ID: uint64(len(prof.Location) + 1), Address: l.Addr, Line: []profile.Line{{Function: fn(l.Func, l.File), Line: l.Line}}}
		if frames := inlineFrames(inl, l.Addr); len(frames) > 0 {
			x.Line = x.Line[:0]
			for i, f := range frames {
				file, line := f.File, f.Line
				if i == 0 {
					file, line = l.File, l.Line
				}
				x.Line = append(x.Line, profile.Line{Function: fn(f.Func, file), Line: line})
			}
		}
		locs[l] = x
		prof.Location = append(prof.Location, x)
		return x
	}
	// A function is the module's own when a line of its is in the
	// module's files: callgrind's fl= for a function is the file of its
	// first instruction, which can be code inlined into it (a benchmark's
	// b.Loop, from package testing).
	prefix := strings.TrimSuffix(modDir, "/") + "/"
	owned := map[string]bool{}
	for l := range p.Lines {
		if rel, ok := strings.CutPrefix(l.File, prefix); ok && modDir != "" && !strings.HasPrefix(rel, "vendor/") {
			owned[l.Func] = true
		}
	}
	own := func(fn string) bool { return owned[fn] }
	byFunc := map[string][]callgrind.Charge{}
	for _, c := range p.Charges(own, root) {
		byFunc[c.Leaf.Func] = append(byFunc[c.Leaf.Func], c)
	}
	// In the order of the functions' costs, then of their lines.
	for _, row := range p.Top() {
		cs := byFunc[row.Func]
		if len(cs) == 0 { // a part without positions: the function alone
			cs = []callgrind.Charge{{Leaf: callgrind.Line{Func: row.Func}, Cost: row.Cost}}
		}
		for _, c := range cs {
			stack := []*profile.Location{loc(c.Leaf)}
			for _, l := range c.Callers {
				stack = append(stack, loc(l))
			}
			prof.Sample = append(prof.Sample, &profile.Sample{Location: stack, Value: []int64{c.Cost}})
		}
	}
	return prof
}

// inlineFrames are the functions at addr, innermost first; none when the
// address or the DWARF is not known.
func inlineFrames(inl *elfsym.Inlines, addr uint64) []elfsym.Frame {
	if inl == nil || addr == 0 {
		return nil
	}
	return inl.Frames(addr)
}

// realCalls is p without the calls whose call site is not in the caller,
// or that did not enter the callee at its start:
// when the scheduler switches goroutines, callgrind can take the jump
// into the resumed goroutine's code for a call from the function that
// ran before (runtime.bgsweep "calling" gjson.Get, at a line of
// gjson.go), which would charge the callee's cost to the wrong callers.
// The call site's function is read from the DWARF; without it, p is kept.
func realCalls(p *callgrind.Part, inl *elfsym.Inlines) *callgrind.Part {
	if inl == nil {
		return p
	}
	q := *p
	q.CallLines = make(map[callgrind.Call]int64, len(p.CallLines))
	for c, v := range p.CallLines {
		if fr := inlineFrames(inl, c.From.Addr); len(fr) > 0 && fr[len(fr)-1].Func != c.From.Func {
			continue
		}
		// A call that did not enter the callee at its first instruction
		// is a goroutine resumed (encoding/json.Marshal "calling" the
		// handler that called it).
		if c.Target != 0 && !inl.Entry(c.Target) {
			continue
		}
		q.CallLines[c] = v
	}
	return &q
}

// inlines holds the last binary's DWARF: each benchmark of a run writes
// its profile from the same test binary, whose DWARF is read once.
var inlines struct {
	sync.Mutex
	key string // the path, size and time of the binary read
	t   *elfsym.Inlines
}

// inlinesOf is binary's DWARF inline table, nil when it cannot be read.
func inlinesOf(binary string) *elfsym.Inlines {
	inlines.Lock()
	defer inlines.Unlock()
	st, err := os.Stat(binary)
	if err != nil {
		return nil
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", binary, st.Size(), st.ModTime().UnixNano())
	if inlines.key != key {
		inlines.t, _ = elfsym.OpenInlines(binary)
		inlines.key = key
	}
	return inlines.t
}
