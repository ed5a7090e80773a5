package probe

import (
	"bytes"
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

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/diff"
	cachedir "github.com/perfspy/perfspy/internal/cache"
	"github.com/perfspy/perfspy/internal/gorelease"
	"github.com/perfspy/perfspy/internal/worktree"
	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
)

// ABSchema is the schema name of ab.json.
const ABSchema = schema.ABSchema

// ErrRegression is returned when a gated metric regressed past its
// threshold. Commands exit 1 on it.
var ErrRegression = errors.New("regression")

// ABConfig is one probe ab.
type ABConfig struct {
	Repo          string // git repository; default "."
	Before, After string // revisions
	// BeforeGo and AfterGo compare two toolchains (GOTOOLCHAIN values,
	// go1.26.8 and go1.27.3): each arm is built by its own. Without
	// revisions both arms are the target's tree as it is.
	BeforeGo, AfterGo string
	Rounds            int    // runs per arm; default 4, the fewest that can reach p < 0.05
	Run               Config // probe run settings; Run.Target is the target, relative to the working directory
	// Bench, when Bench.Bench is set, compares the package's Go
	// benchmarks (probe ab -bench) instead: its Target and Out are each
	// arm's.
	Bench      BenchConfig
	Out        string // default results/<UTC>_ab_<before>_<after>
	MaxRegress map[string]float64
	Control    string // an endpoint whose figures must not change
	Top        int    // function rows per profile; default 10
	// CountsOnly compares exact counts only: one round per arm is
	// enough, and timings are not judged (probe review -timings=false).
	CountsOnly bool
	// BeforeRuns are results folders of earlier rounds of the before
	// revision (probe review's cache): used in its place, not measured
	// again; BeforeWorktree is where that revision's sources were then.
	BeforeRuns     []string
	BeforeWorktree string
}

// abProfiles are the profiles whose functions ab compares, when a run
// wrote them.
var abProfiles = []string{"allocs", "copies", "syscalls", "offcpu", "instructions", "retained", "goroutines_left", "tail_allocs", "tail_copies"}

// Scopes of ABFunction: whose code changed, apart (a toolchain upgrade
// moves the runtime's and the standard library's, not the user's).
const (
	ScopeRuntime = schema.ScopeRuntime
	ScopeStd     = schema.ScopeStd
	ScopeUser    = schema.ScopeUser
)

// funcScope is the scope of a function key.
func funcScope(key string) string {
	switch {
	case wire.IsRuntime(key):
		return ScopeRuntime
	case wire.StandardLibrary(key):
		return ScopeStd
	}
	return ScopeUser
}

// ABResult is ab.json (schema.ABResult), and what probe ab keeps beside
// it for its fronts: the results folder and each arm's profiles.
type ABResult struct {
	schema.ABResult
	Dir string `json:"-"`
	// Profiles are each arm's profile files by profile ("allocs", or an
	// endpoint's "GET /x allocs", or a benchmark's), one per round; their
	// source paths are in Worktrees (each arm's checkout, removed when AB
	// returns).
	Profiles  map[string]map[string][]string `json:"-"`
	Worktrees map[string]string              `json:"-"`
	// pins are the digests of every round's files, taken as the round
	// ended (pins.go): CheckPins reads them again.
	pins map[string][32]byte
	// metrics are the metrics compared, in the report's order.
	metrics []abMetric
}

// MetricNames are the metrics compared, in the report's order: the run's,
// then each endpoint's or each benchmark's.
func (r *ABResult) MetricNames() []string {
	var out []string
	for _, m := range r.metrics {
		if _, ok := r.Metrics[m.name]; ok {
			out = append(out, m.name)
		}
	}
	return out
}

// metricList is the metrics compared: those judge set, else the run's.
func (r *ABResult) metricList(cfg ABConfig) []abMetric {
	if r.metrics != nil {
		return r.metrics
	}
	return metricsFor(cfg.Run)
}

// AB builds two revisions from git worktrees, measures them in interleaved
// rounds (ABBA...) and writes ab.json, bench.txt, report.md and report.html.
func AB(ctx context.Context, cfg ABConfig, logw io.Writer) (*ABResult, error) {
	ab := &abRun{cfg: cfg, logf: func(format string, a ...any) {
		if logw != nil {
			fmt.Fprintf(logw, "probe ab: "+format+"\n", a...)
		}
	}}
	if err := ab.setup(ctx); err != nil {
		return nil, err
	}
	defer ab.close()
	if err := ab.rounds(ctx); err != nil {
		return nil, err
	}
	for _, arm := range []string{"before", "after"} {
		if err := ab.checkInputs(ctx, arm); err != nil {
			return nil, err
		}
	}
	if err := ab.res.CheckPins(); err != nil {
		return nil, err
	}
	ab.judge()
	if err := ab.functions(); err != nil {
		return nil, err
	}
	if err := ab.gate(); err != nil {
		return nil, err
	}
	res := ab.res
	res.Profiles, res.Worktrees = ab.profiles, maps.Clone(ab.dirs)
	if len(cfg.BeforeRuns) > 0 {
		res.Worktrees["before"] = cfg.BeforeWorktree
	}
	if err := ab.persist(); err != nil {
		return nil, err
	}
	if len(res.Gate) > 0 {
		return res, fmt.Errorf("%w: %s", ErrRegression, strings.Join(res.Gate, "; "))
	}
	if !res.Judged {
		return res, fmt.Errorf("%w: %s", ErrNotJudged, strings.Join(res.Reasons, "; "))
	}
	return res, nil
}

// abRun is an ab comparison on its way: set up (revisions, worktrees,
// results folder), rounds, judge, functions, gate, persist.
type abRun struct {
	cfg   ABConfig
	logf  func(string, ...any)
	res   *ABResult
	root  string            // the repository
	rel   string            // the target, relative to the repository
	shas  map[string]string // arm -> commit
	dirs  map[string]string // arm -> worktree
	out   string
	undo  []func()
	bench bytes.Buffer
	// diffSVG is the differential flame graph of the allocations
	diffSVG []byte
	// per arm: metric -> values of each round, of the control, and
	// profile -> files of each round
	values, control map[string]map[string][]float64
	profiles        map[string]map[string][]string
	// tails: per arm, the slowest 1%'s own bills of each round, by part
	// (tailValues)
	tails map[string]map[string][]float64
	// pins are each worktree's files as checked out (checkInputs).
	pins map[string]*worktree.Pins
}

func (ab *abRun) close() {
	for i := len(ab.undo) - 1; i >= 0; i-- {
		ab.undo[i]()
	}
}

// setup checks the configuration, resolves the two revisions, makes the
// results folder and a worktree of each revision.
func (ab *abRun) setup(ctx context.Context) error {
	cfg := &ab.cfg
	if cfg.Repo == "" {
		cfg.Repo = repoOf(*cfg)
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 4
	}
	if cfg.Top <= 0 {
		cfg.Top = 10
	}
	if (cfg.BeforeGo == "") != (cfg.AfterGo == "") {
		return errors.New("-before-go and -after-go name the two toolchains, both or neither")
	}
	for _, c := range [][2]string{{"-before-go", cfg.BeforeGo}, {"-after-go", cfg.AfterGo}} {
		if err := gorelease.CheckToolchain(c[0], c[1]); c[1] != "" && err != nil {
			return err
		}
	}
	// A toolchain the go command fetches is copied into the user's cache
	// folder: checked now, not after the first arm was built and measured.
	if cfg.BeforeGo != "" {
		if _, err := cachedir.UserDir(); err != nil {
			return err
		}
	}
	target := cfg.Run.Target
	if target == "" {
		target = DefaultTarget
	}
	ab.res = &ABResult{ABResult: schema.ABResult{Schema: ABSchema, Rounds: cfg.Rounds, Metrics: map[string]*schema.ABMetric{}}}
	if cfg.BeforeGo != "" && cfg.Before == "" && cfg.After == "" {
		return ab.oneTree(ctx, target)
	}
	if cfg.Before == "" || cfg.After == "" {
		return errors.New("-before and -after name the two revisions (or -before-go and -after-go two toolchains)")
	}
	var err error
	if ab.root, err = git(ctx, cfg.Repo, "rev-parse", "--show-toplevel"); err != nil {
		return fmt.Errorf("%s is not in a git repository: %w", cfg.Repo, err)
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	ab.rel, err = filepath.Rel(ab.root, abs)
	if err != nil || strings.HasPrefix(ab.rel, "..") {
		return fmt.Errorf("target %s is not inside the repository %s", target, ab.root)
	}
	ab.shas = map[string]string{}
	for _, arm := range []string{"before", "after"} {
		rev := map[string]string{"before": cfg.Before, "after": cfg.After}[arm]
		sha, err := git(ctx, ab.root, "rev-parse", "--verify", rev+"^{commit}")
		if err != nil {
			return fmt.Errorf("-%s %s: %w", arm, rev, err)
		}
		ab.shas[arm] = sha
	}
	ab.res.Before = map[string]string{"rev": cfg.Before, "commit": ab.shas["before"]}
	ab.res.After = map[string]string{"rev": cfg.After, "commit": ab.shas["after"]}
	if err := ab.makeOut(); err != nil {
		return err
	}
	return ab.worktrees(ctx)
}

// oneTree sets up the comparison of two toolchains on one tree, the
// target's as it is: no worktree, both arms build the same sources.
func (ab *abRun) oneTree(ctx context.Context, target string) error {
	cfg := ab.cfg
	ab.rel, ab.dirs = target, map[string]string{"before": "", "after": ""}
	commit := "tree"
	if _, version, ok := strings.Cut(target, "@"); ok {
		commit = version
	} else if dir, err := filepath.Abs(target); err == nil {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			if sha, err := git(ctx, dir, "rev-parse", "HEAD"); err == nil {
				commit = sha
			}
		}
	}
	ab.shas = map[string]string{"before": commit, "after": commit}
	ab.res.Before = map[string]string{"rev": cfg.BeforeGo, "commit": commit, "go": cfg.BeforeGo}
	ab.res.After = map[string]string{"rev": cfg.AfterGo, "commit": commit, "go": cfg.AfterGo}
	return ab.makeOut()
}

// toolchain is arm's GOTOOLCHAIN: -before-go's or -after-go's, else the
// run's (Config.Toolchain; "" the environment's).
func (ab *abRun) toolchain(arm string) string {
	if arm == "before" && ab.cfg.BeforeGo != "" {
		return ab.cfg.BeforeGo
	}
	if arm == "after" && ab.cfg.AfterGo != "" {
		return ab.cfg.AfterGo
	}
	return ab.cfg.Run.Toolchain
}

// target is the target as arm builds it: in its worktree, or the tree as
// it is when both arms build one.
func (ab *abRun) target(arm string) string {
	if ab.dirs[arm] == "" {
		return ab.rel
	}
	return filepath.Join(ab.dirs[arm], ab.rel)
}

// workdir is the folder an arm's target runs in: probe's own as it lies
// in the arm's worktree, so that the files a server reads relative to it
// are its revision's; the worktree's root when probe runs outside the
// repository; "" (probe's own) with no worktree.
func (ab *abRun) workdir(arm string) string {
	if ab.dirs[arm] == "" {
		return ""
	}
	if wd, err := os.Getwd(); err == nil {
		if top, err := filepath.EvalSymlinks(ab.root); err == nil {
			if real, err := filepath.EvalSymlinks(wd); err == nil {
				if rel, err := filepath.Rel(top, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					if d := filepath.Join(ab.dirs[arm], rel); isDir(d) {
						return d
					}
				}
			}
		}
	}
	return ab.dirs[arm]
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// makeOut makes the results folder, never an existing one.
func (ab *abRun) makeOut() error {
	out := ab.cfg.Out
	if out == "" {
		b, a := report.ShortCommit(ab.shas["before"]), report.ShortCommit(ab.shas["after"])
		if ab.cfg.BeforeGo != "" {
			b, a = ab.cfg.BeforeGo, ab.cfg.AfterGo
		}
		out = filepath.Join("results", fmt.Sprintf("ab_%s_%s_%s", b, a, filepath.Base(ab.rel)))
		if err := os.MkdirAll("results", 0o755); err != nil {
			return err
		}
	}
	var err error
	if ab.out, err = makeOutDir(out, "", ""); err != nil {
		return err
	}
	ab.res.Dir = ab.out
	return os.Mkdir(filepath.Join(ab.out, "runs"), 0o700)
}

// rounds runs the two arms in interleaved rounds (AB, BA, ...).
func (ab *abRun) rounds(ctx context.Context) error {
	ab.values = map[string]map[string][]float64{"before": {}, "after": {}}
	ab.tails = map[string]map[string][]float64{"before": {}, "after": {}}
	ab.control = map[string]map[string][]float64{"before": {}, "after": {}}
	ab.profiles = map[string]map[string][]string{"before": {}, "after": {}}
	var order strings.Builder
	if len(ab.cfg.BeforeRuns) > 0 {
		if err := ab.reuse(); err != nil {
			return err
		}
		order.WriteString(strings.Repeat("a", len(ab.cfg.BeforeRuns)))
	}
	for r := 0; r < ab.cfg.Rounds; r++ {
		arms := []string{"before", "after"}
		if r%2 == 1 {
			arms[0], arms[1] = arms[1], arms[0]
		}
		if len(ab.cfg.BeforeRuns) > 0 {
			arms = []string{"after"}
		}
		for _, arm := range arms {
			order.WriteByte(map[string]byte{"before": 'A', "after": 'B'}[arm])
			if err := ab.round(ctx, r, arm); err != nil {
				return err
			}
		}
	}
	ab.res.Order = order.String()
	return nil
}

// push sends a round's profiles with send when -push asks: a failure is
// logged, and ends the comparison only with -push-required.
func (ab *abRun) push(rc Config, r int, arm string, send func() error) error {
	if rc.Push.URL == "" {
		return nil
	}
	if err := send(); err != nil {
		ab.logf("round %d, %s: %v", r+1, arm, err)
		if rc.Push.Required {
			return err
		}
	}
	return nil
}

// round measures one arm once, and its control endpoint when asked.
func (ab *abRun) round(ctx context.Context, r int, arm string) error {
	cfg := ab.cfg
	rc := cfg.Run
	rc.Target, rc.Toolchain, rc.Dir = ab.target(arm), ab.toolchain(arm), ab.workdir(arm)
	rc.Out = filepath.Join(ab.out, "runs", fmt.Sprintf("%02d-%s", r+1, arm))
	ab.logf("round %d/%d: %s (%s)", r+1, cfg.Rounds, arm, ab.res.armName(arm))
	if err := ab.checkInputs(ctx, arm); err != nil {
		return fmt.Errorf("round %d, %s: %w", r+1, arm, err)
	}
	if cfg.Bench.Bench != "" {
		return ab.benchRound(ctx, r, arm, rc)
	}
	rr, err := Run(ctx, rc, nil)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		return fmt.Errorf("round %d, %s: %w", r+1, arm, err)
	}
	s := rr.Summary
	if err := ab.push(rc, r, arm, func() error {
		return pushProfiles(ctx, rc.Push, rr.Dir, s, map[string]string{"arm": arm, "endpoint": endpointLabel(rc)})
	}); err != nil {
		return err
	}
	ab.ingest(r, arm, rr.Dir, s)
	ab.toolchainOf(arm, s.Go)
	if err := ab.pin(rr.Dir); err != nil {
		return err
	}
	if cfg.Control == "" {
		return nil
	}
	cc := rc
	cc.Path, cc.Out, cc.OffCPU = cfg.Control, rc.Out+"-control", false
	cr, err := Run(ctx, cc, nil)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		return fmt.Errorf("round %d, %s control: %w", r+1, arm, err)
	}
	for k, v := range metricValues(cr.Summary) {
		ab.control[arm][k] = append(ab.control[arm][k], v)
	}
	return ab.pin(cr.Dir)
}

// ingest takes one round's results folder into arm's figures, profiles
// and bench.txt.
func (ab *abRun) ingest(r int, arm, dir string, s *schema.Summary) {
	if !judgedVerdict(s.Verdict) && s.Verdict != VerdictCountsOnly && !ab.cfg.CountsOnly {
		ab.res.Reasons = append(ab.res.Reasons, fmt.Sprintf("round %d %s not judged: %s", r+1, arm, strings.Join(s.Reasons, "; ")))
	}
	for k, v := range metricValues(s) {
		ab.values[arm][k] = append(ab.values[arm][k], v)
	}
	for k, v := range tailValues(s) {
		ab.tails[arm][k] = append(ab.tails[arm][k], v)
	}
	for _, p := range abProfiles {
		if f, ok := s.Files[p]; ok {
			ab.profiles[arm][p] = append(ab.profiles[arm][p], filepath.Join(dir, f))
		}
	}
	// A request file's endpoints, each measured in windows of its own.
	for _, e := range s.Endpoints {
		for k, v := range endpointValues(e) {
			ab.values[arm][e.Name+" "+k] = append(ab.values[arm][e.Name+" "+k], v)
		}
		for p, f := range e.Files {
			ab.profiles[arm][e.Name+" "+p] = append(ab.profiles[arm][e.Name+" "+p], filepath.Join(dir, f))
		}
	}
	// The mix's routes, split in its one attribution window, each with
	// its own profiles (one route's samples, per request of the route).
	if len(s.Routes) > 1 {
		for i, rt := range s.Routes {
			for k, v := range routeValues(rt) {
				ab.values[arm][rt.Route+" "+k] = append(ab.values[arm][rt.Route+" "+k], v)
			}
			for _, kind := range []string{"allocs", "copies"} {
				if f, ok := s.Files[kind]; ok {
					if path, err := routeProfile(dir, f, i, rt.Route); err == nil {
						ab.profiles[arm][rt.Route+" "+kind] = append(ab.profiles[arm][rt.Route+" "+kind], path)
					}
				}
			}
		}
	}
	fmt.Fprintf(&ab.bench, "arm: %s\ncommit: %s\n", arm, report.ShortCommit(ab.shas[arm]))
	report.BenchLines(&ab.bench, s, filepath.Base(ab.rel))
}

// reuse takes the before arm's rounds from cfg.BeforeRuns, results
// folders of earlier runs of the same revision, instead of measuring it.
func (ab *abRun) reuse() error {
	for i, dir := range ab.cfg.BeforeRuns {
		// Before any round of the other revision runs.
		if err := ab.pin(dir); err != nil {
			return fmt.Errorf("an earlier run of the before revision: %w", err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
		if err != nil {
			return fmt.Errorf("an earlier run of the before revision: %w", err)
		}
		if ab.cfg.Bench.Bench != "" {
			var s schema.BenchSummary
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, "summary.json"), err)
			}
			if err := ab.ingestBench("before", dir, &s); err != nil {
				return err
			}
			continue
		}
		var s schema.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, "summary.json"), err)
		}
		ab.ingest(i, "before", dir, &s)
	}
	return nil
}

// judge compares each metric's rounds, and the control's: a control that
// moved, or too few rounds, make the comparison not judged.
func (ab *abRun) judge() {
	cfg, res := ab.cfg, ab.res
	metrics := metricsFor(cfg.Run)
	if cfg.Bench.Bench != "" {
		metrics = benchABMetrics(ab.values["before"], ab.values["after"])
	} else {
		metrics = append(slices.Clip(metrics), endpointABMetrics(ab.values["before"], ab.values["after"])...)
	}
	res.metrics = metrics
	for _, m := range metrics {
		res.Metrics[m.name] = compareMetric(ab.values["before"][m.name], ab.values["after"][m.name], m.judge, m.higherWorse, m.checked)
	}
	res.Tail = compareTails(ab.tails["before"], ab.tails["after"])
	if cfg.Control != "" {
		res.Control = map[string]*schema.ABMetric{}
		for _, m := range metrics {
			cm := compareMetric(ab.control["before"][m.name], ab.control["after"][m.name], m.judge, m.higherWorse, m.checked)
			res.Control[m.name] = cm
			if cm.Verdict == "regression" || cm.Verdict == "improvement" {
				res.Reasons = append(res.Reasons, fmt.Sprintf("machine moved: the control %s's %s changed %+.1f%%", cfg.Control, m.name, cm.DeltaPct))
			}
		}
	}
	if cfg.Rounds < 2 && !cfg.CountsOnly {
		res.Reasons = append(res.Reasons, "too few rounds: need at least 2 per arm")
	}
	if cfg.CountsOnly {
		for _, m := range metrics {
			if x := res.Metrics[m.name]; !m.judge.Counted() && !m.checked {
				x.Verdict, x.Why = "not judged", "counts only (timings are not compared)"
			}
		}
	}
	res.Judged = len(res.Reasons) == 0
	if res.Judged {
		return
	}
	// Timings from windows that cannot support a verdict (the driver set
	// the pace, the machine moved) give none; exact counts still do.
	for _, m := range metrics {
		if x := res.Metrics[m.name]; m.judge == metric.Timing && (x.Verdict == "regression" || x.Verdict == "improvement") {
			x.Why = fmt.Sprintf("%s %+.2f%%, p %.3f, but the comparison is not judged", x.Verdict, x.DeltaPct, x.P)
			x.Verdict = "not judged"
		}
	}
}

// functions compares each profile's functions: per-request deltas on
// normalized keys, all rounds merged.
func (ab *abRun) functions() error {
	profiles := abProfiles
	if ab.cfg.Bench.Bench != "" {
		profiles = slices.Sorted(maps.Keys(ab.profiles["before"]))
	} else {
		for _, p := range slices.Sorted(maps.Keys(ab.profiles["before"])) {
			if !slices.Contains(abProfiles, p) {
				profiles = append(slices.Clip(profiles), p) // an endpoint's
			}
		}
	}
	for _, p := range profiles {
		bf, af := ab.profiles["before"][p], ab.profiles["after"][p]
		if len(bf) == 0 || len(af) == 0 {
			continue
		}
		b, err := diff.Load(bf, diff.LoadOptions{})
		if err != nil {
			return err
		}
		a, err := diff.Load(af, diff.LoadOptions{})
		if err != nil {
			return err
		}
		sample := ""
		if p == "allocs" || p == "tail_allocs" || strings.HasSuffix(p, " allocs") {
			sample = "alloc_objects" // allocations per request, as allocs/req counts them
		}
		c, err := diff.Compare(b, a, diff.Options{Sample: sample, Folds: profkey.DefaultFolds, Stacks: true})
		if err != nil {
			return fmt.Errorf("%s profiles: %w", p, err)
		}
		scopes := map[string]float64{ScopeRuntime: 0, ScopeStd: 0, ScopeUser: 0}
		listed := 0
		for _, row := range c.Rows {
			f := functionRow(p, c, row)
			scopes[f.Scope] += f.Delta
			if listed == ab.cfg.Top {
				continue
			}
			listed++
			if functionMoved(f, c) {
				ab.res.Functions = append(ab.res.Functions, f)
			}
		}
		if ab.res.Scopes == nil {
			ab.res.Scopes = map[string]map[string]float64{}
		}
		for k, v := range scopes {
			scopes[k] = 0 // no -0 when a rounding is all there is
			if r := round(v, 4); r != 0 {
				scopes[k] = r
			}
		}
		ab.res.Scopes[p] = scopes
		if p == "allocs" || strings.HasSuffix(p, " allocs") && ab.diffSVG == nil {
			ab.diffSVG = diffFlame(bf, af)
		}
	}
	return nil
}

// functionRow is a comparison's row as a function of profile p: per
// request (op) when the profiles say how many.
func functionRow(p string, c *diff.Result, row diff.Row) schema.ABFunction {
	f := schema.ABFunction{Profile: p, Key: row.Key, Before: float64(row.FlatBefore), After: float64(row.FlatAfter), Sample: c.Sample, Unit: c.Unit, Scope: funcScope(row.Key)}
	if c.PerRequest {
		f.Before, f.After = row.FlatBeforePR, row.FlatAfterPR
	}
	f.Delta = f.After - f.Before
	return f
}

// functionMoved says whether a row is a change to list: below a
// hundredth per request, a row is the rounding of background work, not
// the change under review.
func functionMoved(f schema.ABFunction, c *diff.Result) bool {
	return math.Abs(f.Delta) >= 0.01 || !c.PerRequest && f.Delta != 0
}

// gate lists the metrics that regressed past -max-regress, in name order.
func (ab *abRun) gate() error {
	for _, gated := range slices.Sorted(maps.Keys(ab.cfg.MaxRegress)) {
		pct := ab.cfg.MaxRegress[gated]
		names := []string{gated}
		if ab.cfg.Bench.Bench != "" {
			// A unit gates it in every benchmark.
			names = nil
			for _, m := range ab.res.metrics {
				if strings.HasSuffix(m.name, " "+gated) {
					names = append(names, m.name)
				}
			}
		}
		for _, name := range names {
			m := ab.res.Metrics[name]
			if m == nil {
				return fmt.Errorf("-max-regress %s: unknown metric", name)
			}
			if m.Verdict == "regression" && math.Abs(m.DeltaPct) > pct {
				ab.res.Gate = append(ab.res.Gate, fmt.Sprintf("%s %+.2f%% (%.4g -> %.4g), past %g%%", name, m.DeltaPct, m.Before, m.After, pct))
			}
		}
	}
	return nil
}

// persist writes ab.json, bench.txt, report.md and report.html.
func (ab *abRun) persist() error {
	var js bytes.Buffer
	if err := report.JSON(&js, ab.res); err != nil {
		return err
	}
	files := map[string][]byte{"ab.json": js.Bytes(), "bench.txt": ab.bench.Bytes()}
	var md bytes.Buffer
	page := abPage(ab.res, ab.cfg)
	page.Markdown(&md)
	files["report.md"] = md.Bytes()
	html, err := page.HTML(ab.diffSVG)
	if err != nil {
		return err
	}
	files["report.html"] = html
	if ab.diffSVG != nil {
		files["flame-allocs-diff.svg"] = ab.diffSVG
	}
	return writeFiles(ab.out, files)
}

// routeProfile writes route i's samples of the run's profile file (in
// dir) beside it, as route-I-FILE, and returns its path.
func routeProfile(dir, file string, i int, route string) (string, error) {
	p, err := readProfile(filepath.Join(dir, file))
	if err != nil {
		return "", err
	}
	if err := profkey.SelectRoute(p, route); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("route-%d-%s", i+1, file))
	return path, os.WriteFile(path, buf.Bytes(), 0o600)
}

// toolchainOf records the Go release that built arm's round (summary.json
// go) in ab.json's before/after "go". Asked for a toolchain, an arm built
// by another (a go.mod that requires a newer Go) is a reason: the
// comparison is not the one asked for.
func (ab *abRun) toolchainOf(arm, goVersion string) {
	side := ab.res.Before
	if arm == "after" {
		side = ab.res.After
	}
	want := ab.toolchain(arm)
	if want != "" && want != "local" && want != "auto" && goVersion != strings.TrimSuffix(want, "+auto") && goVersion != strings.TrimSuffix(want, "+path") {
		r := fmt.Sprintf("%s asked for %s and was built by %s", arm, want, goVersion)
		if !slices.Contains(ab.res.Reasons, r) {
			ab.res.Reasons = append(ab.res.Reasons, r)
		}
	}
	side["go"] = goVersion
}

// armName is how an arm is named in progress lines: its revision's
// commit, and its toolchain when the arms differ by theirs.
func (r *ABResult) armName(arm string) string {
	side := r.Before
	if arm == "after" {
		side = r.After
	}
	name := report.ShortCommit(side["commit"])
	if g := side["go"]; g != "" {
		name += ", " + g
	}
	return name
}
