package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
	"golang.org/x/perf/benchfmt"

	"github.com/perfspy/perfspy/benchwin"
	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/contain"
	"github.com/perfspy/perfspy/internal/elfsym"
	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/offcpu"
	"github.com/perfspy/perfspy/syscalls"

	"github.com/perfspy/perfspy/internal/proc"

	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/schema"
)

// BenchConfig is probe run -bench: a package's Go benchmarks, each
// measured in its timed region.
type BenchConfig struct {
	Target    string // package folder, module/path/pkg@version, or a standard-library import path
	Toolchain string // GOTOOLCHAIN for the build, "" the environment's (Config.Toolchain)
	Bench     string // the -bench regular expression
	BenchTime string // -benchtime: a duration or Nx; "" is testing's default (1s)
	Count     int    // -count, default 1
	Out       string
	Env       []string // added to the test binary's environment
	Syscalls  string   // bpf (default; none when not root) or off
	Copies    string   // overlay (default) or off
	// OffCPU adds a run under the execution tracer: off-CPU time per op
	// by reason, in the timed regions.
	OffCPU bool
	// Retained measures, in the counted run, what each benchmark's ops
	// leave: the blocks they made still live after what two GCs free, goroutines
	// still running.
	Retained bool
	// Exec runs the test binaries as go test -exec does: Exec[0] with
	// Exec[1:], then the binary and its flags (an emulator such as
	// qemu-aarch64-static for a GOARCH this machine does not run).
	Exec  []string
	Flags []string // every flag as given, for meta
	// Timeout bounds each run of the test binary (0: DefaultBenchTimeout):
	// testing's own -test.timeout does not cover benchmarks, and one that
	// never returns would hold the run, the review and a bisection.
	Timeout time.Duration
	// Instructions adds instructions per op under callgrind: each
	// benchmark run by the plain test binary (its runtime's random
	// choices taken out) at two -benchtime counts, the difference per op
	// (benchins.go).
	Instructions bool
}

// DefaultBenchTimeout is a test binary's run's bound when none is given:
// go test's own default timeout.
const DefaultBenchTimeout = 10 * time.Minute

// ErrBenchTimeout is a run of a test binary that did not end within its
// bound (-bench-timeout): a benchmark that never returns.
var ErrBenchTimeout = errors.New("a benchmark did not return")

// timeout is cfg's bound on each run of the test binary.
func (cfg BenchConfig) timeout() time.Duration {
	if cfg.Timeout > 0 {
		return cfg.Timeout
	}
	return DefaultBenchTimeout
}

// DefaultBenchConfig is probe run -bench's configuration as its flags'
// defaults make it: one run of each benchmark, every counter on.
func DefaultBenchConfig() BenchConfig {
	return BenchConfig{Count: 1, Syscalls: "bpf", Copies: "overlay", OffCPU: true, Retained: true, Timeout: DefaultBenchTimeout}
}

// command is the test binary bin run with args, under cfg.Exec when set.
func (cfg BenchConfig) command(bin string, args ...string) *exec.Cmd {
	if len(cfg.Exec) == 0 {
		return exec.Command(bin, args...)
	}
	return exec.Command(cfg.Exec[0], append(append(append([]string(nil), cfg.Exec[1:]...), bin), args...)...)
}

// checkArch refuses a test binary this machine cannot run: built for
// another GOARCH, and no -exec to run it with.
func (cfg BenchConfig) checkArch(tgt *withagent.Binary) error {
	if len(cfg.Exec) > 0 || tgt.GOARCH == "" || tgt.GOARCH == runtime.GOARCH {
		return nil
	}
	return fmt.Errorf("GOARCH=%s: this %s machine cannot run the test binary; give -exec with an emulator (e.g. -exec qemu-aarch64-static for arm64)", tgt.GOARCH, runtime.GOARCH)
}

// check validates cfg and fills its defaults.
func (cfg *BenchConfig) check() error {
	if _, err := regexp.Compile(cfg.Bench); err != nil {
		return fmt.Errorf("-bench %q: %w", cfg.Bench, err)
	}
	if cfg.BenchTime != "" {
		if n, ok := strings.CutSuffix(cfg.BenchTime, "x"); ok {
			if v, err := strconv.Atoi(n); err != nil || v <= 0 {
				return fmt.Errorf("-benchtime %q: want a duration or a positive count like 1000x", cfg.BenchTime)
			}
		} else if d, err := time.ParseDuration(cfg.BenchTime); err != nil || d <= 0 {
			return fmt.Errorf("-benchtime %q: want a duration or a positive count like 1000x", cfg.BenchTime)
		}
	}
	if cfg.Count == 0 {
		cfg.Count = 1
	}
	if cfg.Count < 0 {
		return fmt.Errorf("-count %d: must be positive", cfg.Count)
	}
	if cfg.Target == "" {
		cfg.Target = "."
	}
	for _, d := range []struct {
		flag  string
		v     *string
		valid []string
	}{{"syscalls", &cfg.Syscalls, []string{"bpf", "off"}}, {"copies", &cfg.Copies, []string{"overlay", "off"}}} {
		if *d.v == "" {
			*d.v = d.valid[0]
		}
		if *d.v != d.valid[0] && *d.v != d.valid[1] {
			return fmt.Errorf("-%s %q with -bench: want %s or %s", d.flag, *d.v, d.valid[0], d.valid[1])
		}
	}
	return nil
}

// args are the test binary's flags: benchmarks only, testing's own
// -benchmem figures printed.
func (cfg *BenchConfig) args() []string {
	a := []string{"-test.run=^$", "-test.bench=" + cfg.Bench, "-test.benchmem", "-test.count=" + strconv.Itoa(cfg.Count)}
	if cfg.BenchTime != "" {
		a = append(a, "-test.benchtime="+cfg.BenchTime)
	}
	return a
}

// countedBenchTime is the benchmark time of the counted and traced runs
// when -benchtime is not given: testing scales b.N to it as it scales it
// to its 1s default in the timing run. The instrumented runs cost each op
// several times a plain op (a memmove with its stack walked), and their
// figures are counts, which do not need a second of them.
const countedBenchTime = "100ms"

// BenchResult is what RunBench produced.
type BenchResult struct {
	Dir     string
	Summary *schema.BenchSummary
}

// ErrBenchmemMismatch is returned, with the files written, when the
// allocations counted in a timed region differ from testing's -benchmem
// count of the same run: the window was not the timed region.
var ErrBenchmemMismatch = errors.New("allocspy and -benchmem disagree")

// RunBench builds the package's test binary twice (plain, and with the
// benchmark window), times the benchmarks with the plain one, counts
// their timed regions with the other, and writes the results folder.
func RunBench(ctx context.Context, cfg BenchConfig, logw io.Writer) (*BenchResult, error) {
	logf := func(format string, a ...any) {
		if logw != nil {
			fmt.Fprintf(logw, "probe: "+format+"\n", a...)
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	// copyspy is built in with -copies off too, idle: one build serves both.
	if cfg.Instructions {
		if err := instructionsRunnable(cfg); err != nil {
			return nil, err
		}
	}
	tgt, err := withagent.Build(ctx, cfg.Target, withagent.BuildOptions{Test: true, Toolchain: cfg.Toolchain, Copies: true, Repeatable: cfg.Instructions, Overlays: spyOverlays(seams{})}, logf)
	if err != nil {
		return nil, err
	}
	tgt = idleOverlays(tgt, cfg.Copies == "off", false)
	if err := cfg.checkArch(tgt); err != nil {
		return nil, err
	}
	commit, out, priv, err := prepareRun(Config{OutputConfig: OutputConfig{Out: cfg.Out}}, tgt)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(priv)
	logf("timing the benchmarks with the plain test binary")
	plain, err := runPlainBench(ctx, tgt, cfg, out)
	if err != nil {
		return nil, err
	}
	// Counts converge long before a timing does: unless -benchtime
	// says otherwise, the instrumented runs are shorter (countedBenchTime).
	counted := cfg
	if counted.BenchTime == "" {
		counted.BenchTime = countedBenchTime
	}
	logf("counting the benchmarks' timed regions")
	start := time.Now()
	bo := &benchOutput{cfg: cfg, tgt: tgt, commit: commit, dir: out, plain: plain, files: map[string][]byte{}}
	stream := newFigureStream(bo)
	win, err := runBenchWindow(ctx, tgt, counted, priv, out, stream)
	if err != nil {
		// No summary.json will name them: a results folder without it
		// is none (bench-window.txt stays and says why).
		stream.discard(out)
		return nil, err
	}
	bo.win, bo.streamed = win, stream.halt()
	if cfg.OffCPU {
		logf("tracing the benchmarks' timed regions (off-CPU time)")
		bo.cuts = boundedExtra(ctx, "the traced run", extraRunBound(time.Since(start)), func(ctx context.Context) (err error) {
			t := traced(counted)
			win.offcpu, err = runBenchTrace(ctx, tgt, t, tracedOps(t, plain), priv, out)
			return err
		})
	}
	if cfg.Instructions {
		logf("counting the benchmarks' instructions per op under callgrind")
		if win.instructions, err = runBenchInstructions(ctx, tgt, cfg, plain, out, logf); err != nil {
			return nil, err
		}
	}
	logf("writing %s", out)
	if err := bo.write(); err != nil {
		return nil, err
	}
	res := &BenchResult{Dir: out, Summary: bo.s}
	if ctx.Err() != nil {
		return res, fmt.Errorf("%w; the runs that finished are written", ctx.Err())
	}
	if len(bo.mismatch) > 0 {
		return res, fmt.Errorf("%w: %s", ErrBenchmemMismatch, strings.Join(bo.mismatch, "; "))
	}
	if names := unstableInstructions(win.instructions); names != "" {
		return res, fmt.Errorf("%w: %s of %s (blind_spots says how far two runs differed)", ErrNotJudged, errInstructionsUnstable, names)
	}
	return res, nil
}

// boundedExtra runs an extra run (the traced one) within bound: what it
// finished is kept when it is cut or interrupted, its figures being
// extras beside the counts. It returns what cut it short, if anything.
func boundedExtra(ctx context.Context, what string, bound time.Duration, run func(ctx context.Context) error) []string {
	if ctx.Err() != nil {
		return []string{what + ": not run (interrupted)"}
	}
	rctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := run(rctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return []string{what + ": interrupted; the results it finished are kept"}
	case rctx.Err() != nil:
		return []string{fmt.Sprintf("%s: cut at its bound of %v (4 times the counted run's time, plus %v); the results it finished are kept", what, bound.Round(time.Second), extraRunFloor)}
	default:
		return []string{fmt.Sprintf("%s: %v", what, err)}
	}
}

// traced is the traced run's configuration: the counted run's, but for a
// -benchtime of Nx with N of 4 or more, which it runs for a quarter of the
// ops, (N/4)x, fewer for a long op (tracedOps). Off-CPU time is a time:
// an average per op, taken over the traced run's own ops (the counts are
// the counted run's, at N), as the default benchtime's countedBenchTime
// takes it over a tenth of the timing run's second.
func traced(counted BenchConfig) BenchConfig {
	if n, ok := strings.CutSuffix(counted.BenchTime, "x"); ok {
		if v, err := strconv.Atoi(n); err == nil && v >= 4 {
			counted.BenchTime = strconv.Itoa(v/4) + "x"
		}
	}
	return counted
}

// extraBudget is what a benchmark's extra ops may take, by its time per
// op: the warm runs' M ops (the recorder bounds them, by the counted
// run's time per op: benchwin.BudgetEnv) and the traced run's ops (by the
// timing run's: tracedOps). At -benchtime Nx a long op made them most of
// probe's time: gin's PathCleanLong, 4.6 ms an op, spent 2.9 s in 503
// warm ops and 2.3 s in 500 traced ones beside the timing run's 9.1 s
// (with 250 ms, 0.6 s in all; 100 ms keeps the off-CPU average over 20
// ops of 5 ms).
// The counts stay the counted run's N ops; the steady figures and the
// off-CPU time per op are taken over fewer. A variable: tests lower it.
var extraBudget = 100 * time.Millisecond

// tracedOps are the traced run's caps (benchwin.OpsEnv's lines), for its
// configuration t at a -benchtime of Nx: each result whose N ops would
// take more than extraBudget at the timing run's slowest time per op
// takes what fits, at least one op. At a benchtime of time testing
// scales each to it: nothing.
func tracedOps(t BenchConfig, plain map[string][]plainResult) string {
	n, ok := strings.CutSuffix(t.BenchTime, "x")
	v, err := strconv.Atoi(n)
	if !ok || err != nil {
		return ""
	}
	var lines []string
	for name, rs := range plain {
		ns := 0.0
		for _, r := range rs {
			ns = max(ns, r.ns)
		}
		if ns > 0 && float64(v)*ns > float64(extraBudget.Nanoseconds()) {
			lines = append(lines, fmt.Sprintf("%s\t%d\n", name, max(1, int(float64(extraBudget.Nanoseconds())/ns))))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// extraRunBound is how long the traced run may take: four times the
// counted run (the same benchmarks, the same -benchtime; the tracer slows
// each op) plus 30 s for its set-up.
func extraRunBound(counted time.Duration) time.Duration {
	return 4*counted + extraRunFloor
}

// extraRunFloor is extraRunBound's allowance for set-ups (a variable: the
// tests that cut a run lower it).
var extraRunFloor = 30 * time.Second

// benchRun runs a test binary to its end in the package's folder, its
// output in logPath; started, when set, runs once it has started.
func benchRun(ctx context.Context, cmd *exec.Cmd, logPath string, timeout time.Duration, started func(*proc.Proc) error) error {
	p, err := proc.StartCmd(cmd, logPath, nil)
	if err != nil {
		return err
	}
	defer p.Stop()
	if started != nil {
		if err := started(p); err != nil {
			return err
		}
	}
	bound := time.NewTimer(timeout)
	defer bound.Stop()
	select {
	case <-p.Done():
	case <-ctx.Done():
		return ctx.Err()
	case <-bound.C:
		p.Stop()
		name := runningBenchmark(ctx, cmd, logPath)
		if name == "" {
			name = "the test binary's set-up (no benchmark had started)"
		}
		return fmt.Errorf("%w: %s ran past %s (-bench-timeout), stopped; its output: %s", ErrBenchTimeout, name, timeout, logPath)
	}
	if p.WaitErr() != nil {
		return fmt.Errorf("%s: %s", filepath.Base(cmd.Path), p.ExitStatus())
	}
	return nil
}

// runningBenchmark is the benchmark a test binary, run as cmd with its
// output at path, was running when it was stopped: of the benchmarks its
// -test.bench matches (-test.list, in the order testing runs them), the
// first with fewer results in the output than -test.count asks. testing
// prints a benchmark's name only once its first op returned, so a
// benchmark that hangs in it is not in the output. "" when none is left.
func runningBenchmark(ctx context.Context, cmd *exec.Cmd, path string) string {
	var args []string
	bench, count := "", 1
	for _, a := range cmd.Args[1:] {
		switch {
		case strings.HasPrefix(a, "-test.bench="):
			bench = strings.TrimPrefix(a, "-test.bench=")
		case strings.HasPrefix(a, "-test.count="):
			count, _ = strconv.Atoi(strings.TrimPrefix(a, "-test.count="))
		case !strings.HasPrefix(a, "-test."):
			args = append(args, a) // an -exec wrapper's words, the binary
		}
	}
	if bench == "" {
		return ""
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list := exec.CommandContext(lctx, cmd.Path, append(args, "-test.list="+bench)...)
	list.Dir, list.Env = cmd.Dir, cmd.Env
	out, err := list.Output()
	if err != nil {
		return ""
	}
	done := map[string]int{}
	if b, err := os.ReadFile(path); err == nil {
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) >= 3 && strings.HasPrefix(f[0], "Benchmark") {
				name, _, _ := strings.Cut(f[0], "/")
				if i := strings.LastIndexByte(name, '-'); i > 0 {
					if _, err := strconv.Atoi(name[i+1:]); err == nil {
						name = name[:i]
					}
				}
				done[name]++
			}
		}
	}
	for name := range strings.Lines(string(out)) {
		if name = strings.TrimSpace(name); strings.HasPrefix(name, "Benchmark") && done[name] < count {
			return name
		}
	}
	return ""
}

// plainResult is one result of the plain run: what go test -bench
// -benchmem prints at the user's -benchtime.
type plainResult struct {
	ns            float64
	n             int
	allocs, bytes float64 // per op, as testing prints them (whole numbers)
	mem           bool    // -benchmem's figures were printed
}

// runPlainBench runs the plain test binary and reads its results, by
// benchmark name, in the order of the runs (-count).
func runPlainBench(ctx context.Context, tgt *withagent.Binary, cfg BenchConfig, out string) (map[string][]plainResult, error) {
	cmd := cfg.command(tgt.PlainBinary, cfg.args()...)
	cmd.Dir, cmd.Env = tgt.PkgDir, targetEnv(Config{TargetConfig: TargetConfig{Env: cfg.Env}})
	logPath := filepath.Join(out, "bench-plain.txt")
	if err := benchRun(ctx, cmd, logPath, cfg.timeout(), nil); err != nil {
		return nil, fmt.Errorf("the plain benchmark run: %w", err)
	}
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ns := map[string][]plainResult{}
	r := benchfmt.NewReader(f, logPath)
	for r.Scan() {
		if res, ok := r.Result().(*benchfmt.Result); ok {
			if v, ok := res.Value("sec/op"); ok {
				name := "Benchmark" + string(res.Name.Full())
				pr := plainResult{ns: v * 1e9, n: res.Iters}
				a, okA := res.Value(metric.AllocsOp)
				b, okB := res.Value(metric.BytesOp)
				pr.allocs, pr.bytes, pr.mem = a, b, okA && okB
				ns[name] = append(ns[name], pr)
			}
		}
	}
	if len(ns) == 0 {
		if names := matchingBenchmarks(ctx, tgt, cfg); len(names) > 0 {
			return nil, fmt.Errorf("-bench %q matches %d benchmark%s of %s (%s), and none printed a result: skipped or failed (go test -v -run '^$' -bench %q says why; %s)",
				cfg.Bench, len(names), map[bool]string{true: "s"}[len(names) > 1], tgt.Spec, firstNames(names, 3), cfg.Bench, logPath)
		}
		return nil, fmt.Errorf("no benchmark of %s matches -bench %q (%s)", tgt.Spec, cfg.Bench, logPath)
	}
	return ns, r.Err()
}

// firstNames joins the first n of names, "..." after them if there are more.
func firstNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", ..."
}

// listTimeout bounds matchingBenchmarks' -test.list run.
const listTimeout = 30 * time.Second

// matchingBenchmarks are the top-level benchmarks -bench's first part
// matches (the plain binary's -test.list), for the error that no result
// was printed: a benchmark that skips (a file it reads is missing) prints
// nothing without -v. nil when they cannot be listed.
func matchingBenchmarks(ctx context.Context, tgt *withagent.Binary, cfg BenchConfig) []string {
	top, _, _ := strings.Cut(cfg.Bench, "/")
	if _, err := regexp.Compile(top); err != nil || top == "" {
		return nil
	}
	// A list takes milliseconds; a TestMain that waits on something
	// is not waited for past listTimeout.
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	args := cfg.command(tgt.PlainBinary, "-test.list", top).Args
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir, cmd.Env = tgt.PkgDir, targetEnv(Config{TargetConfig: TargetConfig{Env: cfg.Env}})
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	contain.DieWithParent(cmd.SysProcAttr)
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var names []string
	for _, l := range strings.Fields(string(out)) {
		if strings.HasPrefix(l, "Benchmark") {
			names = append(names, l)
		}
	}
	return names
}

// benchWindow is what the instrumented run left: the recorder's results
// and, when counted, the syscalls by timed region.
type benchWindow struct {
	dir       string // the recorder's folder
	events    []benchwin.Event
	reports   *benchwin.Reports
	counted   bool                       // syscalls were counted
	sites     map[uint32][]syscalls.Site // by timed region, for the regions of events
	counter   *syscalls.Counter
	sym       *elfsym.Table
	sysReason string // why syscalls were not counted
	// offcpu is the traced run's off-CPU time, by result (in the order
	// of events).
	offcpu []benchWaits
	// instructions are the benchmarks' instructions per op, by name
	// (-instructions).
	instructions map[string]*benchInstructions
}

// benchWaits is one result's off-CPU time in its timed region, of n ops
// (the traced run's own b.N).
type benchWaits struct {
	name    string
	n       int
	nanos   map[string]int64
	profile *profile.Profile
}

// runBenchTrace runs the instrumented test binary once more under the
// execution tracer (its writer would add allocations and syscalls to the
// counted run) and reads each result's waits in its timed region, which
// the recorder marks in the trace.
//
// ops are benchwin.OpsEnv's lines (tracedOps), "" for none.
func runBenchTrace(ctx context.Context, tgt *withagent.Binary, cfg BenchConfig, ops, priv, out string) ([]benchWaits, error) {
	dir := filepath.Join(priv, "trace")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	tracePath := filepath.Join(priv, "bench.trace")
	cmd := cfg.command(tgt.Binary, append(cfg.args(), "-test.trace="+tracePath)...)
	cmd.Dir, cmd.Env = tgt.PkgDir, targetEnv(Config{TargetConfig: TargetConfig{Env: cfg.Env}}, benchwin.Env+"="+dir, benchwin.MarksEnv+"=1")
	if ops != "" {
		opsPath := filepath.Join(priv, "trace-ops")
		if err := os.WriteFile(opsPath, []byte(ops), 0o600); err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, benchwin.OpsEnv+"="+opsPath)
	}
	runErr := benchRun(ctx, cmd, filepath.Join(out, "bench-trace.txt"), cfg.timeout(), nil)
	read := benchwin.ReadEvents
	if runErr != nil {
		// A run cut short keeps the results it reported, from the
		// trace it wrote until then.
		runErr = fmt.Errorf("the traced benchmark run: %w", runErr)
		read = benchwin.ReadFinished
	}
	events, err := read(dir)
	if err != nil || len(events) == 0 {
		return nil, errors.Join(runErr, err)
	}
	f, err := os.Open(tracePath)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	defer f.Close()
	res, err := offcpu.Parse(bufio.NewReader(f), offcpu.Options{Window: benchwin.TraceCategory, Exclude: []string{"runtime/trace.", "runtime.trace", "runtime.(*trace"}, Truncated: runErr != nil})
	if err != nil {
		return nil, errors.Join(runErr, fmt.Errorf("%s: %w", tracePath, err))
	}
	var ws []benchWaits
	for _, e := range events {
		id := strconv.FormatUint(uint64(e.Seq), 10)
		ws = append(ws, benchWaits{name: e.Name, n: e.N, nanos: res.Windows[id], profile: res.WindowProfile(id)})
	}
	return ws, runErr
}

// runBenchWindow runs the instrumented test binary. As root, the syscall
// counter is attached before the first benchmark starts: the recorder
// waits for a byte on its file descriptor 3.
//
// stream, when set, makes the results' counted figures while the run
// goes on; it is halted when the run ends.
func runBenchWindow(ctx context.Context, tgt *withagent.Binary, cfg BenchConfig, priv, out string, stream *figureStream) (*benchWindow, error) {
	w := &benchWindow{dir: filepath.Join(priv, "bench")}
	if err := os.Mkdir(w.dir, 0o700); err != nil {
		return nil, err
	}
	w.reports = benchwin.FollowReports(w.dir)
	if stream != nil {
		stream.start(w)
		defer stream.halt()
	}
	cmd := cfg.command(tgt.Binary, cfg.args()...)
	cmd.Dir, cmd.Env = tgt.PkgDir, targetEnv(Config{TargetConfig: TargetConfig{Env: cfg.Env}}, benchwin.Env+"="+w.dir, benchwin.SteadyEnv+"=1",
		benchwin.BudgetEnv+"="+strconv.FormatInt(extraBudget.Nanoseconds(), 10))
	if cfg.Retained {
		cmd.Env = append(cmd.Env, benchwin.LiveEnv+"=1")
	}
	var started func(*proc.Proc) error
	switch err := capability.BPF("counting syscalls"); {
	case cfg.Syscalls == "off":
		w.sysReason = "-syscalls off"
	case len(cfg.Exec) > 0:
		// The process is the emulator: its system calls are not the
		// program's, one for one.
		w.sysReason = "-exec " + cfg.Exec[0] + ": the benchmark runs under it, whose system calls are not the program's"
	case err != nil:
		w.sysReason = err.Error()
	default:
		addr, err := syscalls.GateAddr(tgt.Binary, benchwin.GateSymbol)
		if err != nil {
			return nil, err
		}
		r, wr, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer wr.Close()
		cmd.ExtraFiles = []*os.File{r}
		cmd.Env = append(cmd.Env, benchwin.SyncEnv+"=1")
		started = func(p *proc.Proc) error {
			r.Close()
			defer wr.Close() // the recorder goes on: at worst with nothing counted
			if w.counter, err = syscalls.OpenGated(p.Pid, addr); err != nil {
				return err
			}
			if w.sym, err = elfsym.Open(tgt.Binary, p.Pid); err != nil {
				return err
			}
			_, err = wr.Write([]byte{1})
			return err
		}
	}
	defer func() {
		if w.counter != nil {
			w.counter.Close()
		}
	}()
	err := benchRun(ctx, cmd, filepath.Join(out, "bench-window.txt"), cfg.timeout(), started)
	stream.halt()
	if err != nil {
		return nil, fmt.Errorf("the counted benchmark run: %w", err)
	}
	if w.events, err = benchwin.ReadEvents(w.dir); err != nil {
		return nil, fmt.Errorf("the benchmark window's results: %w", err)
	}
	if err = w.reports.Update(); err != nil {
		return nil, fmt.Errorf("the benchmark window's reports: %w", err)
	}
	if w.counter != nil {
		regions, err := w.counter.Regions()
		if err != nil {
			return nil, fmt.Errorf("reading the syscall counts: %w", err)
		}
		w.counted, w.sites = true, map[uint32][]syscalls.Site{}
		for _, e := range w.events {
			w.sites[e.Seq] = w.counter.Sites(nil, regions[e.Seq], w.sym)
		}
	}
	return w, nil
}
