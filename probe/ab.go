package probe

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/perfspy/perfspy/diff"
	"github.com/perfspy/perfspy/flame"
	"github.com/perfspy/perfspy/profkey"

	"github.com/perfspy/perfspy/internal/safetext"
)

// ABSchema is the schema name of ab.json.
const ABSchema = "perfspy.ab/v1"

// ErrRegression is returned when a gated metric regressed past its
// threshold. Commands exit 1 on it.
var ErrRegression = errors.New("regression")

// ABConfig is one probe ab.
type ABConfig struct {
	Repo          string // git repository; default "."
	Before, After string // revisions
	Rounds        int    // runs per arm; default 4, the fewest that can reach p < 0.05
	Run           Config // probe run settings; Run.Target is the target, relative to the working directory
	Out           string // default results/<UTC>_ab_<before>_<after>
	MaxRegress    map[string]float64
	Control       string // an endpoint whose figures must not change
	Top           int    // function rows per profile; default 10
}

// How a metric is judged.
type judgement int

const (
	judgeExact        judgement = iota // counts: any change beyond rounding is real
	judgeTiming                        // timings: Mann-Whitney U and a 2% change
	judgeInstructions                  // callgrind counts: beyond the runs' own spread
)

type abMetric struct {
	name        string
	judge       judgement
	higherWorse bool
}

// Metric names, how each is judged, and whether more is worse.
var abMetrics = []abMetric{
	// syscalls/req holds the scheduler's epoll, futex and nanosleep calls,
	// which move with timing: it is judged as timings are.
	{"allocs/req", judgeExact, true}, {"B/req", judgeExact, true}, {"copied-B/req", judgeExact, true}, {"syscalls/req", judgeTiming, true},
	{"cpu-us/req", judgeTiming, true}, {"req/s", judgeTiming, false}, {"p99-us", judgeTiming, true},
}

// instructionMetrics are what an instructions run measures.
var instructionMetrics = []abMetric{{"instructions/req", judgeInstructions, true}}

// metricsFor returns the metrics a configuration measures.
func metricsFor(c Config) []abMetric {
	if c.Instructions {
		return instructionMetrics
	}
	return abMetrics
}

// abProfiles are the profiles whose functions ab compares, when a run
// wrote them.
var abProfiles = []string{"allocs", "copies", "syscalls", "offcpu", "instructions"}

// ABMetric is one metric's comparison.
type ABMetric struct {
	Before   float64 `json:"before"`
	After    float64 `json:"after"`
	Delta    float64 `json:"delta"`
	DeltaPct float64 `json:"delta_pct"`
	P        float64 `json:"p"`
	Verdict  string  `json:"verdict"`
	Why      string  `json:"why,omitempty"`
}

// ABFunction is one function's change per request in one profile.
type ABFunction struct {
	Profile string  `json:"profile"`
	Key     string  `json:"key"`
	Before  float64 `json:"before"`
	After   float64 `json:"after"`
	Delta   float64 `json:"delta"`
}

// ABResult is ab.json.
type ABResult struct {
	Schema    string               `json:"schema"`
	Before    map[string]string    `json:"before"`
	After     map[string]string    `json:"after"`
	Rounds    int                  `json:"rounds"`
	Order     string               `json:"order"`
	Metrics   map[string]*ABMetric `json:"metrics"`
	Functions []ABFunction         `json:"functions"`
	Control   map[string]*ABMetric `json:"control,omitempty"`
	Judged    bool                 `json:"judged"`
	Reasons   []string             `json:"reasons,omitempty"`
	Gate      []string             `json:"gate_failed,omitempty"`
	Dir       string               `json:"-"`
	// metrics are the metrics compared, in the report's order.
	metrics []abMetric
}

// metricList is the metrics compared: those judge set, else the run's.
func (r *ABResult) metricList(cfg ABConfig) []abMetric {
	if r.metrics != nil {
		return r.metrics
	}
	return metricsFor(cfg.Run)
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// metricValues reads a run's figures for the metrics; NaN when absent.
func metricValues(s *Summary) map[string]float64 {
	v := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	return map[string]float64{
		"allocs/req": v(s.PerRequest.Allocs), "B/req": v(s.PerRequest.AllocBytes), "copied-B/req": v(s.PerRequest.CopiedBytes),
		"syscalls/req": v(s.PerRequest.Syscalls), "cpu-us/req": v(s.PerRequest.CPUUS), "req/s": s.Window.RPS,
		"p99-us": float64(s.Window.LatencyUS["p99"]), "instructions/req": v(s.PerRequest.Instructions),
	}
}

func medianOf(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// compareMetric judges one metric. Counts are exact: a change beyond
// rounding (0.5% and 0.02) is one. Timings need a Mann-Whitney U p < 0.05
// and a change of more than 2%. Instruction counts repeat to a fraction of
// a percent but not exactly: a change is one when no run of one arm falls
// within the other's range and the medians differ by more than 0.1% and
// by more than twice the wider arm's spread.
func compareMetric(b, a []float64, judge judgement, higherWorse bool) *ABMetric {
	m := &ABMetric{Before: medianOf(b), After: medianOf(a), P: 1}
	m.Delta = m.After - m.Before
	if m.Before != 0 {
		m.DeltaPct = 100 * m.Delta / m.Before
	}
	if math.IsNaN(m.Before) || math.IsNaN(m.After) {
		return &ABMetric{P: 1, Verdict: "not measured"}
	}
	th := benchmath.DefaultThresholds
	c := benchmath.AssumeNothing.Compare(benchmath.NewSample(b, &th), benchmath.NewSample(a, &th))
	if !math.IsNaN(c.P) {
		m.P = c.P
	}
	changed := false
	switch judge {
	case judgeExact:
		changed = math.Abs(m.Delta) > math.Max(0.005*math.Abs(m.Before), 0.02)
	case judgeInstructions:
		if len(b) < 2 || len(a) < 2 {
			m.Verdict, m.Why = "not judged", "too few rounds to see the runs' spread (need 2 per arm)"
			return m
		}
		spread := math.Max(slices.Max(b)-slices.Min(b), slices.Max(a)-slices.Min(a))
		apart := slices.Min(a) > slices.Max(b) || slices.Max(a) < slices.Min(b)
		changed = apart && math.Abs(m.Delta) > math.Max(0.001*math.Abs(m.Before), 2*spread)
	default:
		if len(b) < 4 || len(a) < 4 {
			m.Verdict, m.Why = "not judged", "too few rounds for significance (need 4 per arm)"
			return m
		}
		changed = m.P < 0.05 && math.Abs(m.DeltaPct) > 2
	}
	switch {
	case !changed:
		m.Verdict = "no change"
	case (m.Delta > 0) == higherWorse:
		m.Verdict = "regression"
	default:
		m.Verdict = "improvement"
	}
	return m
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
	ab.judge()
	if err := ab.functions(); err != nil {
		return nil, err
	}
	if err := ab.gate(); err != nil {
		return nil, err
	}
	res := ab.res
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
		cfg.Repo = repoOf(cfg.Run)
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 4
	}
	if cfg.Top <= 0 {
		cfg.Top = 10
	}
	if cfg.Before == "" || cfg.After == "" {
		return errors.New("-before and -after name the two revisions")
	}
	var err error
	if ab.root, err = git(ctx, cfg.Repo, "rev-parse", "--show-toplevel"); err != nil {
		return fmt.Errorf("%s is not in a git repository: %w", cfg.Repo, err)
	}
	target := cfg.Run.Target
	if target == "" {
		target = DefaultTarget
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	ab.rel, err = filepath.Rel(ab.root, abs)
	if err != nil || strings.HasPrefix(ab.rel, "..") {
		return fmt.Errorf("target %s is not inside the repository %s", target, ab.root)
	}
	ab.res = &ABResult{Schema: ABSchema, Rounds: cfg.Rounds, Metrics: map[string]*ABMetric{}}
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

// repoOf is the folder whose git repository holds the target: the
// target's own folder when it is one, else the working directory.
func repoOf(run Config) string {
	t := run.Target
	if t == "" && run.Bench == "" {
		t = DefaultTarget
	}
	if st, err := os.Stat(t); err == nil && st.IsDir() {
		return t
	}
	return "."
}

// makeOut makes the results folder, never an existing one.
func (ab *abRun) makeOut() error {
	out := ab.cfg.Out
	if out == "" {
		out = filepath.Join("results", fmt.Sprintf("ab_%s_%s_%s", short(ab.shas["before"]), short(ab.shas["after"]), filepath.Base(ab.rel)))
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

// worktrees checks out each revision in a temporary worktree.
func (ab *abRun) worktrees(ctx context.Context) error {
	wt, err := os.MkdirTemp("", "perfspy-ab-")
	if err != nil {
		return err
	}
	ab.undo = append(ab.undo, func() { os.RemoveAll(wt) })
	ab.dirs = map[string]string{}
	for _, arm := range []string{"before", "after"} {
		d := filepath.Join(wt, arm)
		if _, err := git(ctx, ab.root, "worktree", "add", "--detach", d, ab.shas[arm]); err != nil {
			return err
		}
		ab.undo = append(ab.undo, func() { git(context.Background(), ab.root, "worktree", "remove", "--force", d) })
		ab.dirs[arm] = d
	}
	return nil
}

// rounds runs the two arms in interleaved rounds (AB, BA, ...).
func (ab *abRun) rounds(ctx context.Context) error {
	ab.values = map[string]map[string][]float64{"before": {}, "after": {}}
	ab.control = map[string]map[string][]float64{"before": {}, "after": {}}
	ab.profiles = map[string]map[string][]string{"before": {}, "after": {}}
	var order strings.Builder
	for r := 0; r < ab.cfg.Rounds; r++ {
		arms := []string{"before", "after"}
		if r%2 == 1 {
			arms[0], arms[1] = arms[1], arms[0]
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
	rc.Target = filepath.Join(ab.dirs[arm], ab.rel)
	rc.Out = filepath.Join(ab.out, "runs", fmt.Sprintf("%02d-%s", r+1, arm))
	ab.logf("round %d/%d: %s (%s)", r+1, cfg.Rounds, arm, short(ab.shas[arm]))
	if rc.Bench != "" {
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
	if s.Verdict != VerdictServerBound && s.Verdict != VerdictCountsOnly {
		ab.res.Reasons = append(ab.res.Reasons, fmt.Sprintf("round %d %s not judged: %s", r+1, arm, strings.Join(s.Reasons, "; ")))
	}
	for k, v := range metricValues(s) {
		ab.values[arm][k] = append(ab.values[arm][k], v)
	}
	for _, p := range abProfiles {
		if f, ok := s.Files[p]; ok {
			ab.profiles[arm][p] = append(ab.profiles[arm][p], filepath.Join(rr.Dir, f))
		}
	}
	fmt.Fprintf(&ab.bench, "arm: %s\ncommit: %s\n", arm, short(ab.shas[arm]))
	writeBenchLine(&ab.bench, s, filepath.Base(ab.rel))
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
	return nil
}

// judge compares each metric's rounds, and the control's: a control that
// moved, or too few rounds, make the comparison not judged.
func (ab *abRun) judge() {
	cfg, res := ab.cfg, ab.res
	metrics := metricsFor(cfg.Run)
	if cfg.Run.Bench != "" {
		metrics = benchABMetrics(ab.values["before"], ab.values["after"])
	}
	res.metrics = metrics
	for _, m := range metrics {
		res.Metrics[m.name] = compareMetric(ab.values["before"][m.name], ab.values["after"][m.name], m.judge, m.higherWorse)
	}
	if cfg.Control != "" {
		res.Control = map[string]*ABMetric{}
		for _, m := range metrics {
			cm := compareMetric(ab.control["before"][m.name], ab.control["after"][m.name], m.judge, m.higherWorse)
			res.Control[m.name] = cm
			if cm.Verdict == "regression" || cm.Verdict == "improvement" {
				res.Reasons = append(res.Reasons, fmt.Sprintf("machine moved: the control %s's %s changed %+.1f%%", cfg.Control, m.name, cm.DeltaPct))
			}
		}
	}
	if cfg.Rounds < 2 {
		res.Reasons = append(res.Reasons, "too few rounds: need at least 2 per arm")
	}
	res.Judged = len(res.Reasons) == 0
	if res.Judged {
		return
	}
	// Timings from windows that cannot support a verdict (the driver set
	// the pace, the machine moved) give none; exact counts still do.
	for _, m := range metrics {
		if x := res.Metrics[m.name]; m.judge == judgeTiming && (x.Verdict == "regression" || x.Verdict == "improvement") {
			x.Why = fmt.Sprintf("%s %+.2f%%, p %.3f, but the comparison is not judged", x.Verdict, x.DeltaPct, x.P)
			x.Verdict = "not judged"
		}
	}
}

// functions compares each profile's functions: per-request deltas on
// normalized keys, all rounds merged.
func (ab *abRun) functions() error {
	profiles := abProfiles
	if ab.cfg.Run.Bench != "" {
		profiles = slices.Sorted(maps.Keys(ab.profiles["before"]))
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
		if p == "allocs" || strings.HasSuffix(p, " allocs") {
			sample = "alloc_objects" // allocations per request, as allocs/req counts them
		}
		c, err := diff.Compare(b, a, diff.Options{Sample: sample, Folds: profkey.DefaultFolds, Stacks: true})
		if err != nil {
			return fmt.Errorf("%s profiles: %w", p, err)
		}
		for i, row := range c.Rows {
			if i == ab.cfg.Top {
				break
			}
			f := ABFunction{Profile: p, Key: row.Key, Before: float64(row.FlatBefore), After: float64(row.FlatAfter)}
			if c.PerRequest {
				f.Before, f.After = row.FlatBeforePR, row.FlatAfterPR
			}
			f.Delta = f.After - f.Before
			// Below a hundredth per request, a row is the rounding of
			// background work, not the change under review.
			if math.Abs(f.Delta) >= 0.01 || (!c.PerRequest && f.Delta != 0) {
				ab.res.Functions = append(ab.res.Functions, f)
			}
		}
		if p == "allocs" || strings.HasSuffix(p, " allocs") && ab.diffSVG == nil {
			ab.diffSVG = diffFlame(bf, af)
		}
	}
	return nil
}

// gate lists the metrics that regressed past -max-regress, in name order.
func (ab *abRun) gate() error {
	for _, gated := range slices.Sorted(maps.Keys(ab.cfg.MaxRegress)) {
		pct := ab.cfg.MaxRegress[gated]
		names := []string{gated}
		if ab.cfg.Run.Bench != "" {
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
	if err := writeJSON(&js, ab.res); err != nil {
		return err
	}
	files := map[string][]byte{"ab.json": js.Bytes(), "bench.txt": ab.bench.Bytes()}
	var md bytes.Buffer
	writeABReport(&md, ab.res, ab.cfg)
	files["report.md"] = md.Bytes()
	html, err := abHTML(ab.res, ab.cfg, ab.diffSVG)
	if err != nil {
		return err
	}
	files["report.html"] = html
	if ab.diffSVG != nil {
		files["flame-allocs-diff.svg"] = ab.diffSVG
	}
	return writeFiles(ab.out, files)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// writeBenchLine writes a run's result line, as bench.txt does.
func writeBenchLine(w io.Writer, s *Summary, name string) {
	var b bytes.Buffer
	writeBench(&b, s, name, nil)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "Unit ") {
			fmt.Fprintln(w, line)
		}
	}
}

// diffFlame draws the allocation profiles' differential flame graph (SVG).
func diffFlame(before, after []string) []byte {
	// One file per arm is enough to show the shape: the first round's.
	b, err1 := os.Open(before[0])
	a, err2 := os.Open(after[0])
	if err1 != nil || err2 != nil {
		return nil
	}
	defer b.Close()
	defer a.Close()
	t, err := flame.ReadDiff(b, a, flame.Options{})
	if err != nil {
		return nil
	}
	var buf bytes.Buffer
	if flame.WriteSVG(&buf, t, flame.SVGOptions{Title: "allocations: after vs before"}) != nil {
		return nil
	}
	return buf.Bytes()
}

// writeABReport writes the table a reviewer pastes.
func writeABReport(w io.Writer, r *ABResult, cfg ABConfig) {
	fmt.Fprintf(w, "# probe ab: %s → %s\n\n", r.Before["rev"], r.After["rev"])
	fmt.Fprintf(w, "%s → %s, %d rounds per arm, order %s", safetext.Code(short(r.Before["commit"])), safetext.Code(short(r.After["commit"])), r.Rounds, r.Order)
	if !r.Judged {
		fmt.Fprintf(w, ", **not judged**: %s", strings.Join(r.Reasons, "; "))
	}
	fmt.Fprint(w, "\n\n| metric | before | after | delta | delta % | p | verdict |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, m := range r.metricList(cfg) {
		x := r.Metrics[m.name]
		v := x.Verdict
		if x.Why != "" {
			v += " (" + x.Why + ")"
		}
		fmt.Fprintf(w, "| %s | %.4g | %.4g | %+.4g | %+.2f%% | %.3f | %s |\n", m.name, x.Before, x.After, x.Delta, x.DeltaPct, x.P, v)
	}
	if len(r.Gate) > 0 {
		fmt.Fprintf(w, "\n**Gate failed:** %s\n", strings.Join(r.Gate, "; "))
	}
	cur := ""
	for _, f := range r.Functions {
		if f.Profile != cur {
			cur = f.Profile
			per := "request"
			if cfg.Run.Bench != "" {
				per = "op"
			}
			fmt.Fprintf(w, "\n## %s: top function changes per %s\n\n| function | before | after | delta |\n|---|---:|---:|---:|\n", cur, per)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %+.2f |\n", safetext.Code(f.Key), f.Before, f.After, f.Delta)
	}
	fmt.Fprintf(w, "\n## Configuration\n\n%s\n", abConfigLine(cfg))
}

// abConfigLine says how the arms were measured and what counts as a change.
func abConfigLine(cfg ABConfig) string {
	if r := cfg.Run; r.Bench != "" {
		bt := r.BenchTime
		if bt == "" {
			bt = "1s"
		}
		return fmt.Sprintf("package %s, benchmarks %s; ns/op from the plain test binary, every other figure counted in each benchmark's timed region per op; counts are exact (a change beyond 0.5%% is one); ns/op and syscalls/op need p < 0.05 (Mann-Whitney U) and more than 2%%.",
			safetext.Code(r.Target), safetext.Code(fmt.Sprintf("-bench %s -benchtime %s -count %d", r.Bench, bt, max(r.Count, 1))))
	}
	if cfg.Run.Instructions {
		return fmt.Sprintf("target %s, instructions under callgrind, %d requests per window, cpus %s; a change is one when the arms' runs do not overlap and the medians differ by more than 0.1%% and by more than twice the wider arm's spread.",
			safetext.Code(cfg.Run.Target), cfg.Run.Requests, safetext.Markdown(cfg.Run.CPUs))
	}
	return fmt.Sprintf("target %s, duration %v, warm-up %v, conns %s, cpus %s; counts are exact (a change beyond 0.5%% is one); timings need p < 0.05 (Mann-Whitney U) and more than 2%%.",
		safetext.Code(cfg.Run.Target), cfg.Run.Duration, cfg.Run.Warmup, connsName(cfg.Run.Conns), safetext.Markdown(cfg.Run.CPUs))
}

//go:embed assets/ab.html.tmpl
var abPageText string

var abPage = template.Must(template.New("ab").Parse(abPageText))

// abHTML is report.html, a page of its own: the metric and function tables
// as HTML tables, regressions and improvements marked, the differential
// flame graph full width, nothing loaded from elsewhere.
func abHTML(r *ABResult, cfg ABConfig, svg []byte) ([]byte, error) {
	type metricRow struct {
		Name, Before, After, Delta, DeltaPct, P, Verdict, Why string
	}
	type fnRow struct{ Key, Before, After, Delta, Class string }
	type profileRows struct {
		Name string
		Rows []fnRow
	}
	page := struct {
		Before, After, BeforeCommit, AfterCommit, Order, Reasons, Gate, Config string
		Rounds, Regressions                                                    int
		Judged                                                                 bool
		Metrics                                                                []metricRow
		Profiles                                                               []profileRows
		Flame                                                                  template.HTML
	}{Before: r.Before["rev"], After: r.After["rev"], BeforeCommit: short(r.Before["commit"]), AfterCommit: short(r.After["commit"]),
		Order: r.Order, Reasons: strings.Join(r.Reasons, "; "), Gate: strings.Join(r.Gate, "; "), Rounds: r.Rounds, Judged: r.Judged,
		Config: abConfigLine(cfg)}
	for _, m := range r.metricList(cfg) {
		x := r.Metrics[m.name]
		if x.Verdict == "regression" {
			page.Regressions++
		}
		page.Metrics = append(page.Metrics, metricRow{m.name, fmt.Sprintf("%.4g", x.Before), fmt.Sprintf("%.4g", x.After), fmt.Sprintf("%+.4g", x.Delta),
			fmt.Sprintf("%+.2f%%", x.DeltaPct), fmt.Sprintf("%.3f", x.P), x.Verdict, x.Why})
	}
	for _, f := range r.Functions {
		if n := len(page.Profiles); n == 0 || page.Profiles[n-1].Name != f.Profile {
			page.Profiles = append(page.Profiles, profileRows{Name: f.Profile})
		}
		class := "better"
		if f.Delta > 0 {
			class = "worse"
		}
		p := &page.Profiles[len(page.Profiles)-1]
		p.Rows = append(p.Rows, fnRow{f.Key, fmt.Sprintf("%.2f", f.Before), fmt.Sprintf("%.2f", f.After), fmt.Sprintf("%+.2f", f.Delta), class})
	}
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		page.Flame = template.HTML(svg[i:]) // flame writes it, escaped
	}
	var b bytes.Buffer
	// html/template escapes markup; the writer escapes what no page
	// should carry raw (control characters, bidirectional overrides).
	if err := abPage.Execute(safetext.NewWriter(&b), page); err != nil {
		return nil, fmt.Errorf("report.html: %w", err)
	}
	return b.Bytes(), nil
}

// connsName is -conns as the report says it: 0 is the driver's default.
func connsName(n int) string {
	if n == 0 {
		return "the driver's default"
	}
	return strconv.Itoa(n)
}
