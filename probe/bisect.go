package probe

// probe bisect: the commit where an exact count changed, one counted run
// per step (docs/bisect.md).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/diff"
	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/internal/worktree"
	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
)

// BisectSchema is bisect.json's schema.
const BisectSchema = "perfspy.bisect/v1"

// bisectMetrics are the exact counts bisect can follow (metric's rows
// judged as counts whose profile is allocs.pb.gz or copies.pb.gz, compared
// by probe ab), by written name, and the profile whose functions say what
// moved: a count needs one run per step, a timing would need rounds and a
// verdict at each.
var bisectMetrics = func() map[string]string {
	out := map[string]string{}
	for _, m := range metric.Table {
		prof := strings.TrimSuffix(m.Profile, ".pb.gz")
		if !m.Judged.Counted() || !m.Compared || prof != "allocs" && prof != "copies" {
			continue
		}
		for _, n := range m.Names() {
			out[n] = prof
		}
	}
	return out
}()

// Bisectable reports whether probe bisect follows metric (an exact count).
func Bisectable(metric string) bool {
	_, ok := bisectMetrics[metric]
	return ok
}

// minBisectChange is the least change between good and bad that bisect
// follows: below it the figure's rounding (a pool's refill after a GC)
// would decide the steps.
const minBisectChange = 0.5

// BisectConfig is probe bisect's configuration.
type BisectConfig struct {
	Good, Bad string // revisions: the figure at Good is the one before the change
	Metric    string // a key of bisectMetrics: .../req for a server, .../op with Bench
	Repo      string // the git repository, default the target's own
	Run       Config
	Bench     BenchConfig // Bench.Bench set: the package's benchmarks, Σ over them
	Out       string
}

// BisectStep is one commit measured.
type BisectStep struct {
	Commit  string   `json:"commit"`
	Subject string   `json:"subject"`
	Value   *float64 `json:"value"`             // null when skipped
	Skipped string   `json:"skipped,omitempty"` // why: its build failed
	Bad     bool     `json:"bad"`               // nearer the bad revision's figure than the good's
	Dir     string   `json:"dir,omitempty"`
}

// BisectResult is bisect.json.
type BisectResult struct {
	Schema string            `json:"schema"`
	Metric string            `json:"metric"`
	Good   map[string]string `json:"good"`
	Bad    map[string]string `json:"bad"`
	// Commits are the first-parent commits after good up to bad that
	// descend from good, oldest first; Steps the ones measured, in the
	// order they were.
	Commits []string      `json:"commits"`
	Steps   []*BisectStep `json:"steps"`
	// Merge, when the first bad commit of Commits is a merge whose merged
	// line holds the change, is that merge; Merged are the merged lines'
	// commits bisected after it (first parents after the merge base,
	// oldest first), First one of them.
	Merge  *BisectStep `json:"merge,omitempty"`
	Merged []string    `json:"merged,omitempty"`
	// First is the first bad commit and Before the last good one before
	// it; Candidates, when skipped builds leave more than one commit
	// that may be first, all of them (First the last).
	First      *BisectStep `json:"first"`
	Before     *BisectStep `json:"before"`
	Candidates []string    `json:"candidates,omitempty"`
	// Functions are the functions whose figure moved from Before to
	// First, per request (or op), largest change first.
	Functions []schema.ABFunction `json:"functions"`
	Dir       string              `json:"dir"`
}

// Bisect finds the first commit from cfg.Good to cfg.Bad whose metric is
// nearer Bad's figure than Good's, measuring one run per step.
func Bisect(ctx context.Context, cfg BisectConfig, logw io.Writer) (*BisectResult, error) {
	// Each commit is built by the toolchain its go.mod asks for, as the
	// go command does under GOTOOLCHAIN=auto and as probe review does: a
	// range that moves the go line builds on both sides of the move. A
	// GOTOOLCHAIN in the environment is the user's choice, and kept.
	if os.Getenv("GOTOOLCHAIN") == "" {
		if cfg.Run.Toolchain == "" {
			cfg.Run.Toolchain = "auto"
		}
		if cfg.Bench.Toolchain == "" {
			cfg.Bench.Toolchain = "auto"
		}
	}
	b := &bisector{cfg: cfg, measured: map[string]*BisectStep{}, logf: func(format string, a ...any) {
		if logw != nil {
			fmt.Fprintf(logw, "probe bisect: "+format+"\n", a...)
		}
	}}
	commits, err := b.setup(ctx)
	if err != nil {
		return nil, err
	}
	defer b.set.Remove()
	res := b.res
	good, err := b.measure(ctx, commits[0])
	if err != nil {
		return nil, err
	}
	bad, err := b.measure(ctx, commits[len(commits)-1])
	if err != nil {
		return nil, err
	}
	if good.Value == nil || bad.Value == nil {
		return nil, fmt.Errorf("the good or the bad revision did not build: %s", cmp.Or(good.Skipped, bad.Skipped))
	}
	b.good, b.bad, b.ready = *good.Value, *bad.Value, true
	b.logf("%s %.4f at good %s, %.4f at bad %s; %d commits after good", cfg.Metric, b.good, report.ShortCommit(commits[0]), b.bad, report.ShortCommit(commits[len(commits)-1]), len(res.Commits))
	if math.Abs(b.bad-b.good) < minBisectChange {
		b.persist()
		return res, fmt.Errorf("%w: %s is %.4f at good and %.4f at bad: no change of %g or more to bisect", ErrNotJudged, cfg.Metric, b.good, b.bad, minBisectChange)
	}
	good.Bad, bad.Bad = false, true
	lo, hi, candidates, err := b.search(ctx, commits)
	if err != nil {
		return nil, err
	}
	res.Candidates = candidates
	res.First, res.Before = b.measured[commits[hi]], b.measured[commits[lo]]
	if len(candidates) == 0 {
		if err := b.intoMerge(ctx); err != nil {
			return nil, err
		}
	}
	if err := b.functions(); err != nil {
		return nil, err
	}
	if err := b.persist(); err != nil {
		return nil, err
	}
	return res, nil
}

// search bisects commits, whose first is measured good and last bad: it
// returns the last good and the first bad commit's indexes, or, when every
// commit between two measured ones was skipped, the commits that may be
// the first bad one.
func (b *bisector) search(ctx context.Context, commits []string) (lo, hi int, candidates []string, err error) {
	lo, hi = 0, len(commits)-1
	for hi-lo > 1 {
		i, step, err := b.probeBetween(ctx, commits, lo, hi)
		if err != nil {
			return 0, 0, nil, err
		}
		if step == nil { // every commit between lo and hi skipped
			return lo, hi, append(slices.Clone(commits[lo+1:hi]), commits[hi]), nil
		}
		if step.Bad {
			hi = i
		} else {
			lo = i
		}
	}
	return lo, hi, nil, nil
}

// intoMerge goes on when the first bad commit is a merge: the change may
// have come in with the commits it merged (a branch merged into the main
// line, or the main line merged into a branch: "update branch"). Their
// line (the merged parent's first parents after the merge base) is
// bisected in its turn, from the merge base, which must measure good, to
// the merged parent, which must measure bad; otherwise the merge itself
// stays the first bad commit (what the two sides do together).
func (b *bisector) intoMerge(ctx context.Context) error {
	for range 8 { // merges within merges
		merge := b.res.First
		out, err := git(ctx, b.root, "rev-list", "--parents", "-n", "1", merge.Commit)
		if err != nil {
			return err
		}
		parents := strings.Fields(out)[1:]
		if len(parents) < 2 {
			return nil
		}
		var line []string
		for _, p := range parents[1:] {
			base, err := git(ctx, b.root, "merge-base", parents[0], p)
			if err != nil {
				continue // unrelated histories: nothing to bisect there
			}
			list, err := git(ctx, b.root, "rev-list", "--first-parent", "--ancestry-path", "--reverse", base+".."+p)
			if err != nil {
				return err
			}
			commits := append([]string{base}, strings.Fields(list)...)
			if len(commits) < 2 {
				continue
			}
			b.logf("%s is a merge: its merged line, %d commits after %s", report.ShortCommit(merge.Commit), len(commits)-1, report.ShortCommit(base))
			lo, err := b.measure(ctx, base)
			if err != nil {
				return err
			}
			hi, err := b.measure(ctx, p)
			if err != nil {
				return err
			}
			if lo.Value == nil || lo.Bad || hi.Value == nil || !hi.Bad {
				continue
			}
			line = commits
			break
		}
		if line == nil {
			return nil
		}
		lo, hi, candidates, err := b.search(ctx, line)
		if err != nil {
			return err
		}
		b.res.Merged = append(b.res.Merged, line[1:]...)
		b.res.Merge = merge
		if len(candidates) > 0 {
			b.res.Candidates = candidates
			return nil
		}
		b.res.First, b.res.Before = b.measured[line[hi]], b.measured[line[lo]]
	}
	return nil
}

// setup checks the configuration, resolves the two revisions and the
// commits between them, makes the results folder and the worktrees' set.
// It returns the commits, good first and bad last.
func (b *bisector) setup(ctx context.Context) ([]string, error) {
	cfg := b.cfg
	if _, ok := bisectMetrics[cfg.Metric]; !ok {
		return nil, fmt.Errorf("-metric %q: bisect follows exact counts: %s", cfg.Metric, strings.Join(slices.Sorted(maps.Keys(bisectMetrics)), ", "))
	}
	if bench := cfg.Bench.Bench != ""; bench != strings.HasSuffix(cfg.Metric, "/op") {
		return nil, fmt.Errorf("-metric %s: a server's figures are .../req, -bench's .../op", cfg.Metric)
	}
	if cfg.Good == "" || cfg.Bad == "" {
		return nil, errors.New("-good and -bad name the two revisions")
	}
	target := cmp.Or(cfg.Run.Target, DefaultTarget)
	if cfg.Bench.Bench != "" {
		target = cfg.Bench.Target
	}
	repo := cmp.Or(cfg.Repo, repoOf(ABConfig{Run: Config{TargetConfig: TargetConfig{Target: target}}, Bench: BenchConfig{Bench: cfg.Bench.Bench, Target: target}}))
	var err error
	if b.root, err = git(ctx, repo, "rev-parse", "--show-toplevel"); err != nil {
		return nil, fmt.Errorf("%s is not in a git repository: %w", repo, err)
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, err
	}
	b.rel, err = filepath.Rel(b.root, abs)
	if err != nil || strings.HasPrefix(b.rel, "..") {
		return nil, fmt.Errorf("target %s is not inside the repository %s", target, b.root)
	}
	b.res = &BisectResult{Schema: BisectSchema, Metric: cfg.Metric}
	shas := map[string]string{}
	for name, rev := range map[string]string{"good": cfg.Good, "bad": cfg.Bad} {
		if shas[name], err = git(ctx, b.root, "rev-parse", "--verify", rev+"^{commit}"); err != nil {
			return nil, fmt.Errorf("-%s %s: %w", name, rev, err)
		}
	}
	b.res.Good = map[string]string{"rev": cfg.Good, "commit": shas["good"]}
	b.res.Bad = map[string]string{"rev": cfg.Bad, "commit": shas["bad"]}
	if _, err := git(ctx, b.root, "merge-base", "--is-ancestor", shas["good"], shas["bad"]); err != nil {
		return nil, fmt.Errorf("-good %s is not an ancestor of -bad %s", cfg.Good, cfg.Bad)
	}
	// Only commits that descend from good: a branch's own commits from
	// before it merged good in (an "update branch" merge from the main
	// line) lack what good has, and would read as bad for it.
	list, err := git(ctx, b.root, "rev-list", "--first-parent", "--ancestry-path", "--reverse", shas["good"]+".."+shas["bad"])
	if err != nil {
		return nil, err
	}
	if b.res.Commits = strings.Fields(list); len(b.res.Commits) == 0 {
		return nil, fmt.Errorf("-good %s and -bad %s are the same commit", cfg.Good, cfg.Bad)
	}
	// Without -out, a folder stamped with the time, as probe run's: a
	// second bisection of the same range (another metric or path) never
	// meets the first's.
	name := fmt.Sprintf("%s_%s", report.ShortCommit(shas["bad"]), filepath.Base(b.rel))
	if b.res.Dir, err = makeOutDir(cfg.Out, "bisect_"+report.ShortCommit(shas["good"]), name); err != nil {
		return nil, err
	}
	if b.set, err = worktree.New(ctx, b.root, "bisect"); err != nil {
		return nil, err
	}
	return append([]string{shas["good"]}, b.res.Commits...), nil
}

// bisector is a bisection on its way.
type bisector struct {
	cfg       BisectConfig
	res       *BisectResult
	root, rel string
	set       *worktree.Set
	logf      func(string, ...any)
	good, bad float64
	ready     bool // good and bad measured: a step is classed by them
	measured  map[string]*BisectStep
}

// probeBetween measures the commit halfway between lo and hi, or, when
// its build fails, the nearest one between them that builds: it returns
// its index and step, or nil when none between them builds.
func (b *bisector) probeBetween(ctx context.Context, commits []string, lo, hi int) (int, *BisectStep, error) {
	mid := (lo + hi) / 2
	for d := 0; d < hi-lo; d++ {
		for _, i := range []int{mid + d, mid - d} {
			if i <= lo || i >= hi || d == 0 && i != mid {
				continue
			}
			if s := b.measured[commits[i]]; s != nil && s.Value == nil {
				continue
			}
			step, err := b.measure(ctx, commits[i])
			if err != nil {
				return 0, nil, err
			}
			if step.Value != nil {
				return i, step, nil
			}
		}
	}
	return 0, nil, nil
}

// measure runs the target (or the benchmarks) at commit once, counting:
// its step, with Value nil when it did not build.
func (b *bisector) measure(ctx context.Context, commit string) (*BisectStep, error) {
	if s := b.measured[commit]; s != nil {
		return s, nil
	}
	subject, _ := git(ctx, b.root, "log", "-1", "--format=%s", commit)
	step := &BisectStep{Commit: commit, Subject: subject}
	b.measured[commit] = step
	b.res.Steps = append(b.res.Steps, step)
	idx := len(b.res.Steps) - 1
	dir, err := b.set.Add(ctx, report.ShortCommit(commit), commit)
	if err != nil {
		return nil, err
	}
	step.Dir = filepath.Join(b.res.Dir, "runs", fmt.Sprintf("%02d-%s", idx+1, report.ShortCommit(commit)))
	if err := os.MkdirAll(filepath.Dir(step.Dir), 0o700); err != nil {
		return nil, err
	}
	target := filepath.Join(dir, b.rel)
	b.logf("step %d: %s %s", idx+1, report.ShortCommit(commit), subject)
	// As probe ab's arms: a commit whose target, or a folder its module
	// builds from, leads outside its own tree is not built.
	if err := cmp.Or(insideTree(dir, b.rel), worktree.CheckReplaces(dir, target)); err != nil {
		step.Skipped, step.Dir = err.Error(), ""
		b.logf("  skipped: %s", step.Skipped)
		return step, nil
	}
	var v float64
	if b.cfg.Bench.Bench != "" {
		bc := b.cfg.Bench
		bc.Target, bc.Out = target, step.Dir
		r, err := RunBench(ctx, bc, nil)
		if skip := buildFailed(err); skip != "" {
			step.Skipped, step.Dir = skip, ""
			b.logf("  skipped: %s", skip)
			return step, nil
		}
		if err != nil && !errors.Is(err, ErrBenchmemMismatch) {
			return nil, fmt.Errorf("%s: %w", report.ShortCommit(commit), err)
		}
		if len(r.Summary.Benchmarks) == 0 {
			return nil, fmt.Errorf("%s: -bench %s matched no benchmark", report.ShortCommit(commit), bc.Bench)
		}
		for _, f := range r.Summary.Benchmarks {
			v += benchFigure(f.PerOp, b.cfg.Metric)
		}
	} else {
		rc := b.cfg.Run
		rc.Target, rc.Out = target, step.Dir
		// The folder the target runs in: probe's own, as it lies in the
		// commit's worktree (probe ab's arms do the same).
		rc.Dir = (&abRun{root: b.root, dirs: map[string]string{"step": dir}}).workdir("step")
		r, err := Run(ctx, rc, nil)
		if skip := buildFailed(err); skip != "" {
			step.Skipped, step.Dir = skip, ""
			b.logf("  skipped: %s", skip)
			return step, nil
		}
		if err != nil && !errors.Is(err, ErrNotJudged) {
			return nil, fmt.Errorf("%s: %w", report.ShortCommit(commit), err)
		}
		v = metricValues(r.Summary)[b.cfg.Metric]
		if math.IsNaN(v) {
			// A target that answers nothing (it hangs, or fails every
			// request): skipped, as a commit that does not build.
			step.Skipped, step.Dir = fmt.Sprintf("the run measured no %s (%d requests answered, %d errors; sources %v)", b.cfg.Metric, r.Summary.Window.Requests, r.Summary.Window.Errors, r.Summary.Sources), ""
			b.logf("  skipped: %s", step.Skipped)
			return step, nil
		}
	}
	v = round(v, 4)
	step.Value = &v
	if b.ready {
		step.Bad = math.Abs(v-b.bad) < math.Abs(v-b.good)
	}
	b.logf("  %s %.4f", b.cfg.Metric, v)
	return step, nil
}

// benchFigure is a benchmark's per-op figure of name, at the table's
// path; NaN when absent.
func benchFigure(p schema.BenchPerOp, name string) float64 {
	v, ok := metric.Values(metric.Doc(map[string]any{"per_op": p}), "op")[name]
	if !ok {
		return math.NaN()
	}
	return v
}

// buildFailed says why err is a build that failed (the commit is
// skipped, as git bisect skip does), or "" when it is not.
func buildFailed(err error) string {
	var be *withagent.BuildError
	var nm *withagent.NotMainError
	switch {
	case errors.As(err, &be):
		// The first line that is not the go command's package header.
		first := ""
		for _, l := range strings.Split(strings.TrimSpace(be.Output), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				first = l
				break
			}
		}
		return "the build failed: " + cmp.Or(first, be.Err.Error())
	case errors.As(err, &nm):
		return "no main package there: " + nm.Error()
	case errors.Is(err, proc.ErrNotReady), errors.Is(err, proc.ErrExitedEarly):
		return "the target did not start: " + err.Error()
	case errors.Is(err, ErrBenchTimeout):
		return "a benchmark did not return: " + err.Error()
	}
	return ""
}

// functions compares the profile of the metric between the last good
// commit and the first bad one, function by function.
func (b *bisector) functions() error {
	if b.res.First == nil || b.res.Before == nil || b.res.First.Dir == "" || b.res.Before.Dir == "" {
		return nil
	}
	prof := bisectMetrics[b.cfg.Metric]
	files := func(dir string) []string {
		if b.cfg.Bench.Bench == "" {
			return []string{filepath.Join(dir, prof+".pb.gz")}
		}
		var s schema.BenchSummary
		if raw, err := os.ReadFile(filepath.Join(dir, "summary.json")); err == nil && json.Unmarshal(raw, &s) == nil {
			var out []string
			for _, f := range s.Benchmarks {
				if p, ok := f.Files[prof]; ok {
					out = append(out, filepath.Join(dir, p))
				}
			}
			return out
		}
		return nil
	}
	bf, af := files(b.res.Before.Dir), files(b.res.First.Dir)
	if len(bf) == 0 || len(af) == 0 {
		return nil
	}
	// What moved is named at the code that asked for it: a module's
	// function, not the standard library's leaf under it.
	before, err := diff.Load(bf, diff.LoadOptions{Callers: true})
	if err != nil {
		return err
	}
	after, err := diff.Load(af, diff.LoadOptions{Callers: true})
	if err != nil {
		return err
	}
	m, _ := metric.Lookup(b.cfg.Metric)
	sample := m.Sample
	c, err := diff.Compare(before, after, diff.Options{Sample: sample, Folds: profkey.DefaultFolds})
	if err != nil {
		return fmt.Errorf("%s profiles: %w", prof, err)
	}
	for _, row := range c.Rows {
		if f := functionRow(prof, c, row); functionMoved(f, c) {
			b.res.Functions = append(b.res.Functions, f)
		}
		if len(b.res.Functions) == 10 {
			break
		}
	}
	return nil
}

// persist writes bisect.json and report.md.
func (b *bisector) persist() error {
	raw, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.res.Dir, "bisect.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	WriteBisectReport(&md, b.res)
	return os.WriteFile(filepath.Join(b.res.Dir, "report.md"), []byte(md.String()), 0o644)
}

// WriteBisectReport writes what a bisection found, as markdown (its
// terminal form too).
func WriteBisectReport(w io.Writer, r *BisectResult) {
	fmt.Fprintf(w, "# probe bisect: %s\n\n", r.Metric)
	merged := ""
	if len(r.Merged) > 0 {
		merged = fmt.Sprintf(", and %d commits that a merge brought in", len(r.Merged))
	}
	fmt.Fprintf(w, "Good %s (%s), bad %s (%s): %d commits after good, first parent%s; %d measured, one counted run each.\n\n",
		r.Good["rev"], report.ShortCommit(r.Good["commit"]), r.Bad["rev"], report.ShortCommit(r.Bad["commit"]), len(r.Commits), merged, len(r.Steps))
	switch {
	case len(r.Candidates) > 0:
		fmt.Fprintf(w, "**The first bad commit is one of %d** (the builds between failed):", len(r.Candidates))
		for _, c := range r.Candidates {
			fmt.Fprintf(w, " `%s`", report.ShortCommit(c))
		}
		fmt.Fprintln(w)
	case r.First != nil && r.Before != nil && r.First.Value != nil && r.Before.Value != nil:
		via := ""
		if r.Merge != nil {
			via = fmt.Sprintf(" (merged by `%s` %s)", report.ShortCommit(r.Merge.Commit), r.Merge.Subject)
		}
		fmt.Fprintf(w, "**First bad commit: `%s`** %s%s\n\n%s %.4f at `%s`, %.4f at `%s` (%+.4f).\n",
			report.ShortCommit(r.First.Commit), r.First.Subject, via, r.Metric, *r.Before.Value, report.ShortCommit(r.Before.Commit), *r.First.Value, report.ShortCommit(r.First.Commit), *r.First.Value-*r.Before.Value)
	default:
		fmt.Fprintln(w, "No commit named: the figure did not change between good and bad.")
	}
	if len(r.Functions) > 0 {
		fmt.Fprintf(w, "\nWhat moved (%s, per %s):\n\n| function | before | after | delta |\n|---|---|---|---|\n", r.Functions[0].Sample, strings.TrimPrefix(r.Metric[strings.Index(r.Metric, "/"):], "/"))
		for _, f := range r.Functions {
			fmt.Fprintf(w, "| `%s` | %.2f | %.2f | %+.2f |\n", f.Key, f.Before, f.After, f.Delta)
		}
	}
	fmt.Fprintf(w, "\nSteps:\n\n| # | commit | subject | %s | side |\n|---|---|---|---|---|\n", r.Metric)
	for i, s := range r.Steps {
		val, side := "skipped", s.Skipped
		if s.Value != nil {
			val, side = fmt.Sprintf("%.4f", *s.Value), "good"
			if s.Bad {
				side = "bad"
			}
		}
		fmt.Fprintf(w, "| %d | `%s` | %s | %s | %s |\n", i+1, report.ShortCommit(s.Commit), s.Subject, val, side)
	}
}
