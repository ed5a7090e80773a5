package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/perfspy/perfspy/callgrind"
	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// Instructions per op (probe run -bench RE -instructions): each benchmark
// is run by the plain test binary, built with the runtime's random
// choices taken out (withagent's repeatable overlay), under callgrind, at
// two -benchtime counts that call the benchmark function as many times:
// what a run pays once (the process's start, testing's, the benchmark's
// set-up before its loop) is in both and cancels; the difference is
// insOps ops, by function. A second run at the longer count checks that
// the figure repeats (two more when it does not, the closest two kept):
// one that moves by more than insSpread of the ops' instructions is
// refused, named, never given.

// insShort is the shorter run's -benchtime count: 2, so that testing
// calls the benchmark function twice in both runs (a first run of one
// op, then the run of N), and the difference holds no call of it.
const insShort = 2

// insSpread is the most two runs of the same count may differ by, over
// the ops' own instructions: what the figure is said to repeat to.
const insSpread = 0.001

// insGodebug is the environment of the runs under callgrind: no
// asynchronous preemption (callgrind asserts on its signals), no heap
// profile sampling, no RDTSCP (valgrind does not know it), no GC (its
// cycles start at points that vary from run to run), one P.
// One P: with more, the idle ones' Ms spin looking for work, for as
// long as timing lets them (10^8 instructions between two runs of the
// same count); testing then names the result without a -P suffix.
var insGodebug = []string{"GODEBUG=asyncpreemptoff=1,memprofilerate=0,cpu.rdtscp=off", "GOGC=off", "GOMAXPROCS=1"}

// benchInstructions is one benchmark's instructions per op.
type benchInstructions struct {
	bare  string          // the benchmark's name without its -P suffix
	ops   int             // the ops the difference holds
	diff  *callgrind.Part // the longer run less the shorter, by function
	perOp float64
	// spread is how far the two longer runs differ, over the ops' own
	// instructions; unstable says why the figure is refused, "" when not.
	spread   float64
	unstable string
}

// instructionsRunnable refuses, before any build, what callgrind cannot
// count here.
func instructionsRunnable(cfg BenchConfig) error {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return fmt.Errorf("-instructions: callgrind counts amd64 Linux binaries here, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if len(cfg.Exec) > 0 {
		return fmt.Errorf("-instructions: not with -exec %s (an emulator's instructions are not the program's)", cfg.Exec[0])
	}
	if _, err := capability.Tool("valgrind", "valgrind"); err != nil {
		return fmt.Errorf("-instructions: %w", err)
	}
	return nil
}

// insBudget is the instructions the difference's ops hold, about: a
// second or so under callgrind, and an op's share of what a run pays once
// small beside it.
const insBudget = 2e7

// insNativeNS bounds the ops of a run under callgrind by the plain op's
// time: callgrind runs a program some 50 times slower, so 200 ms of plain
// ops are about ten seconds. An op of 0.67 s (encoding/json on a 2 MB
// document) runs one op in the probe, not 20 (twelve minutes).
const insNativeNS = 2e8

// insMinPerNS is the fewest instructions per nanosecond of a plain op
// that a count of the op's own work can hold: fewer, and the op ran
// outside what callgrind counted (a sub-benchmark that a helper's b.Run
// starts, not a closure of the benchmark function: fastjson's
// BenchmarkParse/canada/stdjson-empty-struct counted 46 instructions an op
// of 0.67 s), or it waits: refused.
const insMinPerNS = 0.05

// insOps are the ops of the probe run and K, the ops the difference holds,
// for a benchmark whose plain op took ns and, after the probe, ran perOp
// instructions: insBudget of them, at most insNativeNS of plain time and
// 10^7 ops, at least one op; at most 20 in the probe.
func insProbeOps(ns float64) int {
	return int(min(max(math.Floor(insNativeNS/4/ns), 1), 20))
}

func insOpsFor(perOp, ns float64) int {
	k := 1e7
	if perOp > 0 {
		k = min(math.Ceil(insBudget/perOp), k)
	}
	if ns > 0 {
		k = min(k, math.Floor(insNativeNS/ns))
	}
	return int(max(k, 1))
}

// benchPattern is the -test.bench pattern that runs exactly the result
// bare (its name without the -P suffix): each level anchored.
func benchPattern(bare string) string {
	parts := strings.Split(bare, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// sharedProcsSuffix is the -P suffix testing put on every result name of a run
// whose GOMAXPROCS was P (not 1), "" when the names share none: the runs
// under callgrind have one P, and name their results without it. Read
// from the names, not from probe's own GOMAXPROCS, which -env GOMAXPROCS
// or a cgroup's limit may make another.
func sharedProcsSuffix(names []string) string {
	suffix := ""
	for i, n := range names {
		j := strings.LastIndexByte(n, '-')
		if j < 0 {
			return ""
		}
		if _, err := strconv.Atoi(n[j+1:]); err != nil {
			return ""
		}
		if i > 0 && n[j:] != suffix {
			return ""
		}
		suffix = n[j:]
	}
	return suffix
}

// runBenchInstructions counts each benchmark's instructions per op.
func runBenchInstructions(ctx context.Context, tgt *withagent.Binary, cfg BenchConfig, plain map[string][]plainResult, out string, logf func(string, ...any)) (map[string]*benchInstructions, error) {
	tools, err := capability.Tool("valgrind", "valgrind")
	if err != nil {
		return nil, fmt.Errorf("-instructions: %w", err)
	}
	dir := filepath.Join(out, "callgrind")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(plain))
	suffix := sharedProcsSuffix(names)
	// The benchmarks are counted side by side, one a core: an instruction
	// count does not depend on what else the machine runs (the timings
	// were taken before), and valgrind's start and its translation of the
	// binary are most of a short benchmark's cost.
	counted := make([]*benchInstructions, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, insWorkers())
	var wg sync.WaitGroup
	for i, name := range names {
		bare := strings.TrimSuffix(name, suffix)
		run := func(n, j int) (*callgrind.Part, error) {
			file := filepath.Join(dir, fmt.Sprintf("%03d-%d-%d.out", i+1, n, j))
			p, err := insRun{tools[0], tgt, cfg}.callgrindBench(ctx, bare, n, file)
			if err != nil {
				return nil, fmt.Errorf("%s: instructions per op: %w", name, err)
			}
			return p, nil
		}
		ns := math.NaN()
		if ps := plain[name]; len(ps) > 0 {
			ns = ps[0].ns
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			counted[i], errs[i] = measure(run, ns)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := map[string]*benchInstructions{}
	for i, name := range names {
		bi := counted[i]
		if errs[i] != nil {
			// One benchmark that cannot be counted is refused, named;
			// the others are counted.
			bi = &benchInstructions{unstable: errs[i].Error()}
		}
		bi.bare = strings.TrimSuffix(name, suffix)
		if bi.unstable != "" {
			logf("  %s: instructions/op refused: %s", name, bi.unstable)
		} else {
			logf("  %s: %.1f instructions/op (%d ops; repeats to %.4f%%)", name, bi.perOp, bi.ops, bi.spread*100)
		}
		res[name] = bi
	}
	return res, nil
}

// insWorkers is how many benchmarks are counted at once: one a core, at
// most four (valgrind holds the binary's translation, hundreds of MB).
func insWorkers() int { return max(1, min(runtime.NumCPU(), 4)) }

// measure counts one benchmark, whose plain op took ns, with run (a run
// of n ops under callgrind, the j-th of the benchmark): the short run, the
// probe that chooses K, the two long runs.
func measure(run func(n, j int) (*callgrind.Part, error), ns float64) (*benchInstructions, error) {
	short, err := run(insShort, 0)
	if err != nil {
		return nil, err
	}
	probeOps := insProbeOps(ns)
	first, err := run(insShort+probeOps, 1)
	if err != nil {
		return nil, err
	}
	perOp := float64(first.Total-short.Total) / float64(probeOps)
	if ns > 0 && perOp < insMinPerNS*ns {
		return &benchInstructions{unstable: fmt.Sprintf("%.0f instructions counted an op that took %.0f ns: the op ran outside the benchmark's own functions (a sub-benchmark a helper's b.Run starts) or waits; not counted", perOp, ns)}, nil
	}
	bi := &benchInstructions{ops: insOpsFor(perOp, ns)}
	long := insShort + bi.ops
	// Two runs of the long count; when they differ by more than
	// insSpread, up to two more, and the closest two are kept: a rare run
	// counts work that is not the op's (callgrind takes a goroutine the
	// scheduler switched to for a call from the benchmark function, when
	// a timer falls due during it), about one run in a hundred here.
	var parts []*callgrind.Part
	for j := 0; j < 4; j++ {
		p, err := run(long, j+2)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
		if len(parts) < 2 {
			continue
		}
		slices.SortFunc(parts, func(a, b *callgrind.Part) int { return cmp.Compare(a.Total, b.Total) })
		a, b := closestPair(parts)
		bi.diff = diffParts(parts[a], short)
		if bi.diff.Total > 0 {
			bi.spread = float64(parts[b].Total-parts[a].Total) / float64(bi.diff.Total)
		}
		if bi.diff.Total <= 0 || bi.spread <= insSpread {
			parts = []*callgrind.Part{parts[a], parts[b]}
			break
		}
	}
	bi.perOp = float64(bi.diff.Total) / float64(bi.ops)
	if bi.diff.Total <= 0 || bi.spread > insSpread {
		bi.unstable = fmt.Sprintf("no two of %d runs of %d ops came within %.1f%% of the ops' own instructions (%d); the closest differ by %.3f%%", len(parts), long, insSpread*100, bi.diff.Total, bi.spread*100)
	}
	return bi, nil
}

// insRun is what runs a benchmark under callgrind: valgrind, the test
// binary and the run's configuration.
type insRun struct {
	valgrind string
	tgt      *withagent.Binary
	cfg      BenchConfig
}

// callgrindBench runs one benchmark, bare its name without a -P suffix,
// n ops under callgrind and reads its costs.
func (r insRun) callgrindBench(ctx context.Context, bare string, n int, file string) (*callgrind.Part, error) {
	valgrind, tgt, cfg := r.valgrind, r.tgt, r.cfg
	// The count is written at one width (testing reads 000000002x as 2):
	// arguments of one length leave the heap laid out alike in both
	// runs, and what a run pays once (testing's reading of the memory
	// statistics as its timer starts and stops) alike too.
	//
	// Counted only while the benchmark function, or a closure of it (a
	// sub-benchmark's), is on the thread's call stack: testing's own work
	// (its output, whose length follows the time it measured; the GC it
	// runs between runs) and the runtime's other threads are not, and the
	// runs repeat to the instruction.
	// A sub-benchmark runs on a goroutine of its own while its parent
	// waits in b.Run, its thread running whatever else is runnable: the
	// parent function is not counted then, only its closures.
	top, _, sub := strings.Cut(bare, "/")
	toggles := []string{"--toggle-collect=*." + top + ".func*"}
	if !sub {
		toggles = []string{"--toggle-collect=*." + top, "--toggle-collect=*." + top + ".*"}
	}
	args := append([]string{"--tool=callgrind", "--dump-instr=yes"}, toggles...)
	cmd := exec.Command(valgrind, append(args, "--callgrind-out-file="+file, tgt.PlainBinary,
		"-test.run=^$", "-test.bench="+benchPattern(bare), "-test.benchtime="+fmt.Sprintf("%09dx", n), "-test.count=1")...)
	cmd.Dir = tgt.PkgDir
	cmd.Env = append(targetEnv(Config{TargetConfig: TargetConfig{Env: cfg.Env}}), insGodebug...)
	logPath := file + ".log"
	if err := benchRun(ctx, cmd, logPath, cfg.timeout(), nil); err != nil {
		return nil, err
	}
	// The run must have run this benchmark, n ops.
	log, err := os.ReadFile(logPath)
	if err != nil {
		return nil, err
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(bare) + `\s+` + strconv.Itoa(n) + `\s`).Match(log) {
		return nil, fmt.Errorf("the run under callgrind did not report %s at %d ops (%s)", bare, n, logPath)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	parts, err := callgrind.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	sum := callgrind.NewPart()
	for _, p := range parts {
		sum.Add(p, 1)
	}
	return sum, nil
}

// diffParts is a less b, by function, line and call: what the longer
// run's extra ops ran.
func diffParts(a, b *callgrind.Part) *callgrind.Part {
	d := callgrind.NewPart()
	d.Add(a, 1)
	d.Add(b, -1)
	maps.DeleteFunc(d.Self, func(_ string, v int64) bool { return v == 0 })
	maps.DeleteFunc(d.Lines, func(_ callgrind.Line, v int64) bool { return v == 0 })
	maps.DeleteFunc(d.CallLines, func(_ callgrind.Call, v int64) bool { return v == 0 })
	return d
}

// benchRoot says which functions are the benchmark's own (named as
// callgrind's toggles count them: the function, its closures), bare its
// name without the -P suffix: the roots of what was counted.
func benchRoot(bare string) func(string) bool {
	top, _, _ := strings.Cut(bare, "/")
	return func(fn string) bool {
		_, f, ok := strings.Cut(fn[strings.LastIndex(fn, "/")+1:], ".")
		return ok && (f == top || strings.HasPrefix(f, top+".func"))
	}
}

// closestPair is the indexes of the two parts, sorted by total, whose
// totals are closest (the lower first).
func closestPair(parts []*callgrind.Part) (int, int) {
	best := 0
	for i := 1; i+1 < len(parts); i++ {
		if parts[i+1].Total-parts[i].Total < parts[best+1].Total-parts[best].Total {
			best = i
		}
	}
	return best, best + 1
}

// errInstructionsUnstable is a benchmark whose instructions per op do not
// repeat under callgrind (goroutines that RunParallel or the benchmark
// starts, timing-dependent paths): refused, not given.
var errInstructionsUnstable = errors.New("instructions per op that do not repeat")

// instructionFigures gives a result its instructions per op and their
// profile (by function, the ops' own), or says why it has none.
func (o *benchOutput) instructionFigures(f *schema.BenchFigures, folder string, comments []string) error {
	bi := o.win.instructions[f.Name]
	if bi == nil {
		return nil
	}
	if bi.unstable != "" {
		return nil // refused: write names it in the blind spots
	}
	v := round(bi.perOp, 2)
	f.PerOp.Instructions, f.InstructionsOps = &v, bi.ops
	// The profile holds the difference's ops: its divisor is theirs, not
	// the counted run's N.
	cs := slices.Clone(comments)
	for i, c := range cs {
		if strings.HasPrefix(c, profkey.RequestsComment) {
			cs[i] = profkey.RequestsComment + strconv.Itoa(bi.ops)
		}
	}
	p := instructionsProfile(bi.diff, o.tgt.ModDir, o.tgt.PlainBinary, benchRoot(bi.bare))
	if err := o.profile(f, folder, "instructions", p, cs); err != nil {
		return err
	}
	o.addTop(folder, "instructions", "", p, 0, bi.ops)
	cp, total, err := compilerCopies(p, o.tgt.PlainBinary)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	cv := round(float64(total)/float64(bi.ops), 2)
	f.PerOp.CompilerCopiedBytes = &cv
	if err := o.profile(f, folder, "compiler_copies", cp, cs); err != nil {
		return err
	}
	o.addTop(folder, "bytes the compiler copies", "B", cp, 0, bi.ops)
	return nil
}

// unstableInstructions names the benchmarks whose instructions per op
// were refused, "" when none was.
func unstableInstructions(ins map[string]*benchInstructions) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(ins)) {
		if ins[name].unstable != "" {
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}
