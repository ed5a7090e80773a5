package probe

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/callgrind"
	"github.com/perfspy/perfspy/internal/capability"
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
	vargs := append([]string{"--tool=callgrind", "--combine-dumps=yes", "--dump-instr=no", "--callgrind-out-file=" + cr.cgOut, binary}, args...)
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
	pp := instructionsProfile(win)
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

// instructionsProfile writes the window's exclusive costs by function.
func instructionsProfile(p *callgrind.Part) *profile.Profile {
	prof := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "instructions", Unit: "count"}},
		PeriodType: &profile.ValueType{Type: "instructions", Unit: "count"},
		Period:     1,
	}
	// A sample a function's source line (its exclusive cost there), in
	// the order of the functions' costs, then of the lines; a function
	// in another file (code inlined from it) is a function entry of its
	// own, so that the line names its file.
	funcs := map[[2]string]*profile.Function{}
	byFunc := map[string][]callgrind.Line{}
	for l, c := range p.Lines {
		if c != 0 {
			byFunc[l.Func] = append(byFunc[l.Func], l)
		}
	}
	for _, row := range p.Top() {
		lines := byFunc[row.Func]
		if len(lines) == 0 { // a part without positions: the function alone
			lines = []callgrind.Line{{Func: row.Func}}
		}
		slices.SortFunc(lines, func(a, b callgrind.Line) int {
			return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
		})
		for _, l := range lines {
			fn := funcs[[2]string{l.Func, l.File}]
			if fn == nil {
				fn = &profile.Function{ID: uint64(len(prof.Function) + 1), Name: l.Func, SystemName: l.Func, Filename: l.File}
				funcs[[2]string{l.Func, l.File}] = fn
				prof.Function = append(prof.Function, fn)
			}
			cost := p.Lines[l]
			if l.File == "" && l.Line == 0 && len(byFunc[row.Func]) == 0 {
				cost = row.Cost
			}
			loc := &profile.Location{ID: uint64(len(prof.Location) + 1), Line: []profile.Line{{Function: fn, Line: l.Line}}}
			prof.Location = append(prof.Location, loc)
			prof.Sample = append(prof.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{cost}})
		}
	}
	return prof
}
