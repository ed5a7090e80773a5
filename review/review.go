// Package review is probe review: every server and benchmark of a
// repository's .perfspy.yml measured at two revisions as probe ab measures
// them, the gates of the file applied, and the result written where a pull
// request is reviewed: a comment body (review.md), annotations on the
// source lines that added the cost (GitHub workflow commands), and
// review.json (docs/review.md).
package review

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/perfspy/perfspy/flame"
	cachedir "github.com/perfspy/perfspy/internal/cache"
	"github.com/perfspy/perfspy/internal/worktree"
	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/schema"
)

// Schema is review.json's schema name.
const Schema = schema.ReviewSchema

// Options are probe review's flags.
type Options struct {
	Repo   string // a folder in the repository; default "."
	Config string // default ROOT/.perfspy.yml
	Base   string // default: the merge base with $GITHUB_BASE_REF or the default branch
	Head   string // default HEAD
	Out    string // default results/review_BASE_HEAD
	// Cache keeps the base revision's exact counts by commit, Go version,
	// configuration and perfspy version; with Timings off a cached base is
	// not measured again.
	Cache   string
	Timings bool
	// Rounds, Warmup and Duration override the configuration's.
	Rounds           int
	Warmup, Duration time.Duration
	// Getenv reads the environment (GITHUB_BASE_REF, GITHUB_STEP_SUMMARY);
	// nil is os.Getenv.
	Getenv func(string) string
}

// Result is review.json (schema.Review), and the review's folder.
type Result struct {
	schema.Review
	Dir string `json:"-"`
	cfg *Config
	// baseLines are the base's lines each annotation's line is compared
	// with (annKey), for the compiler's reasons.
	baseLines map[string][]int
	// headLines are, by annKey, the head's lines of the hunk an
	// annotation's changed line is in (where the source is read).
	headLines map[string][]int
	// codeChanged says that the head changed a Go file: else only go.mod
	// (go.sum) did, and every figure that moved is theirs.
	codeChanged bool
	modCache    string // GOMODCACHE, when go.mod's requirements changed
	// changedLines says, by annKey, which annotations are on a line the
	// head changed.
	changedLines map[string]bool
	// causedLines are, by annKey, the changes on changed lines that also
	// made a line the head left alone allocate (its line: alloc).
	causedLines map[string]lineChange
	// depMoved is, by item and profile (depKey), what each go.mod change
	// moved per request (op) in the allocations it was read for: the
	// stacks walked up from the allocating frame to the changed module's
	// innermost frame, so that a standard-library leaf (net/mail under a
	// validator) is its caller's module's.
	depMoved map[string]map[schema.GoModChange]float64
}

// depKey names an item's profile in depMoved.
func depKey(item, profile string) string { return item + "\x00" + profile }

// ErrGate is returned when a gate failed; ErrItems when no gate failed
// but an item could not be measured (the others are reported);
// ErrNotJudged when nothing could be judged.
var (
	ErrGate      = errors.New("gate failed")
	ErrItems     = errors.New("not every item could be measured")
	ErrNotJudged = errors.New("nothing could be judged")
)

// Review measures both revisions and writes the results folder.
func Review(ctx context.Context, opt Options, logw io.Writer) (*Result, error) {
	logf := func(format string, a ...any) {
		if logw != nil {
			fmt.Fprintf(logw, "probe review: "+format+"\n", a...)
		}
	}
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	if opt.Repo == "" {
		opt.Repo = "."
	}
	root, err := git(ctx, opt.Repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("%s is not in a git repository: %w", opt.Repo, err)
	}
	if opt.Config == "" {
		opt.Config = filepath.Join(root, ConfigFile)
	}
	cfg, err := LoadConfig(opt.Config, root)
	if err != nil {
		return nil, err
	}
	base, head, err := revisions(ctx, root, opt)
	if err != nil {
		return nil, err
	}
	res := &Result{Review: schema.Review{Schema: Schema, Base: base, Head: head, Config: opt.Config}, cfg: cfg}
	res.readHistory(ctx, root, logf)
	if res.Dir, err = makeOut(opt.Out, base["commit"], head["commit"]); err != nil {
		return nil, err
	}
	// Every server, then every benchmark package: one probe ab each.
	type job struct {
		what, kind, name string
		measure          func() (*schema.ReviewItem, *probe.ABResult, error)
	}
	var jobs []job
	m := measurer{root: root, out: res.Dir, cfg: cfg, opt: opt, base: base["commit"], head: head["commit"], logw: logw}
	if opt.Cache != "" {
		if m.cache, err = cacheFlag(opt.Cache); err != nil {
			return nil, err
		}
	}
	for _, s := range cfg.Servers {
		jobs = append(jobs, job{"server " + s.Name + " (" + s.Target + ")", "server", s.Name, func() (*schema.ReviewItem, *probe.ABResult, error) {
			return m.server(ctx, s)
		}})
	}
	for _, b := range cfg.Benchmarks {
		jobs = append(jobs, job{"benchmarks " + b.Package + " " + b.Bench, "benchmarks", b.Package + " " + b.Bench, func() (*schema.ReviewItem, *probe.ABResult, error) {
			return m.benchmarks(ctx, b)
		}})
	}
	for _, j := range jobs {
		logf("%s at %s and %s", j.what, short(base["commit"]), short(head["commit"]))
		it, ab, err := j.measure()
		if err != nil {
			if ctx.Err() != nil { // interrupted: nothing more is measured
				return nil, fmt.Errorf("%s: %w", j.what, err)
			}
			// One item that cannot be measured is named with its error;
			// the others are measured and reported.
			logf("%s: %v", j.what, err)
			it = &schema.ReviewItem{Kind: j.kind, Name: j.name, Error: err.Error()}
		}
		res.Items = append(res.Items, it)
		if ab != nil {
			res.addAnnotations(ctx, root, it, ab)
			// The Go that built each revision (its go.mod's).
			for _, side := range []struct{ to, from map[string]string }{{res.Base, ab.Before}, {res.Head, ab.After}} {
				if g := side.from["go"]; g != "" && side.to["go"] == "" {
					side.to["go"] = g
				}
			}
		}
	}
	if took, err := res.explain(ctx, root); err != nil {
		logf("the compiler's reasons: %v", err)
	} else if took > 0 {
		logf("the compiler's reasons (-gcflags=-m=2, both revisions): %.1f s", took.Seconds())
	}
	res.verdict()
	if err := res.write(opt.Getenv); err != nil {
		return res, err
	}
	switch res.Verdict {
	case "fail":
		return res, fmt.Errorf("%w: %s", ErrGate, strings.Join(res.GateFailed, "; "))
	case "incomplete":
		return res, fmt.Errorf("%w: %s", ErrItems, strings.Join(res.Reasons, "; "))
	case "not judged":
		return res, fmt.Errorf("%w: %s", ErrNotJudged, strings.Join(res.Reasons, "; "))
	}
	return res, nil
}

// cacheFlag opens -cache DIR, held to the cache folder's checks: the
// base's counts are judged from there, and a folder another user can
// write (or a link to one) could change the verdict.
func cacheFlag(flagDir string) (*cache, error) {
	dir, err := filepath.Abs(flagDir)
	if err == nil {
		err = cachedir.Ensure(dir)
	}
	var ue *cachedir.UnsafeError
	if errors.As(err, &ue) {
		return nil, &ConfigError{File: "-cache", Msg: fmt.Sprintf("%s %s: another user could change the base's counts this review judges; give -cache a folder of your own", ue.Dir, ue.Reason)}
	}
	if err != nil {
		return nil, fmt.Errorf("-cache: %w", err)
	}
	return openCache(dir), nil
}

// measurer is what every item of one review shares: the repository, the
// review's folder, the file and the options, the two commits and where
// progress goes.
type measurer struct {
	cache      *cache // -cache, its record read before any head's code ran
	root, out  string
	cfg        *Config
	opt        Options
	base, head string
	logw       io.Writer
}

// newInHead is an item whose folder the base revision does not have: a
// server or a package the pull request adds. It is reported as new, with
// nothing to compare, and the review goes on.
func (m measurer) newInHead(ctx context.Context, kind, name, path string) (*schema.ReviewItem, bool) {
	p := filepath.ToSlash(filepath.Clean(path))
	if p == "." {
		p = "" // the root: "REV:" is its tree
	}
	if _, err := git(ctx, m.root, "cat-file", "-e", m.base+":"+p); err == nil {
		return nil, false
	}
	return &schema.ReviewItem{Kind: kind, Name: name, Reasons: []string{fmt.Sprintf("new in the head: the base (%s) has no %s, so there is nothing to compare", short(m.base), path)}}, true
}

// server runs probe ab on one server.
func (m measurer) server(ctx context.Context, s Server) (*schema.ReviewItem, *probe.ABResult, error) {
	if it, ok := m.newInHead(ctx, "server", s.Name, s.Target); ok {
		return it, nil, nil
	}
	abc, err := probe.NewABConfig(filepath.Join(m.root, s.Target), "")
	if err != nil {
		return nil, nil, err
	}
	abc.Before, abc.After, abc.Repo, abc.Out = m.base, m.head, m.root, filepath.Join(m.out, "servers", safeName(s.Name))
	m.window(&abc, s.Rounds, s.Warmup, s.Duration)
	if !m.opt.Timings {
		m.countsOnly(&abc, s)
	}
	for _, f := range []struct{ to, v *string }{{&abc.Run.Path, &s.Path}, {&abc.Run.Proto, &s.Proto}, {&abc.Run.Method, &s.Method}} {
		if *f.v != "" {
			*f.to = *f.v
		}
	}
	if s.Conns > 0 {
		abc.Run.Conns = s.Conns
	}
	in := probe.RunInputs{Args: s.Args, Data: s.Data}
	if f, ok := strings.CutPrefix(s.Data, "@"); ok {
		in.Data = "@" + filepath.Join(m.root, f) // relative to the root, as every path of the file
	}
	if s.Requests != "" {
		in.Requests = filepath.Join(m.root, s.Requests)
	}
	if err := abc.Run.ReadInputs(in); err != nil {
		return nil, nil, err
	}
	ab, err := m.runAB(ctx, abc, "server "+s.Name, progress(m.logw, s.Name))
	if err != nil {
		return nil, nil, err
	}
	it := &schema.ReviewItem{Kind: "server", Name: s.Name, Dir: rel(m.out, ab.Dir), Judged: ab.Judged, Reasons: ab.Reasons, Functions: ab.Functions, Tail: ab.Tail}
	it.Route = "the request mix"
	if s.Requests == "" {
		it.Route = routeOf(abc)
	}
	it.Changes = changes(ab, m.cfg, it.Route, "req")
	if err := ab.CheckPins(); err != nil {
		return nil, nil, err
	}
	rejudge(it, ab, m.cfg)
	m.flames(it, ab)
	return it, ab, nil
}

// benchmarks runs probe ab -bench on one package.
func (m measurer) benchmarks(ctx context.Context, b Benchmark) (*schema.ReviewItem, *probe.ABResult, error) {
	if it, ok := m.newInHead(ctx, "benchmarks", b.Package+" "+b.Bench, b.Package); ok {
		return it, nil, nil
	}
	abc, err := probe.NewABConfig(filepath.Join(m.root, b.Package), b.Bench)
	if err != nil {
		return nil, nil, err
	}
	abc.Before, abc.After, abc.Repo, abc.Out = m.base, m.head, m.root, filepath.Join(m.out, "benchmarks", safeName(b.Package+"_"+b.Bench))
	m.window(&abc, b.Rounds, 0, 0)
	if b.BenchTime != "" {
		abc.Bench.BenchTime = b.BenchTime
	}
	if b.Count > 0 {
		abc.Bench.Count = b.Count
	}
	abc.Bench.Instructions = b.Instructions
	ab, err := m.runAB(ctx, abc, "benchmarks "+b.Package+" "+b.Bench, progress(m.logw, b.Package))
	if err != nil {
		return nil, nil, err
	}
	it := &schema.ReviewItem{Kind: "benchmarks", Name: b.Package + " " + b.Bench, Dir: rel(m.out, ab.Dir), Judged: ab.Judged, Reasons: ab.Reasons, Functions: ab.Functions, Once: ab.Once}
	it.Changes = changes(ab, m.cfg, "", "op")
	if err := ab.CheckPins(); err != nil {
		return nil, nil, err
	}
	rejudge(it, ab, m.cfg)
	m.flames(it, ab)
	return it, ab, nil
}

// flameSample is the sample type each profile kind's differential flame
// graph shows: what the review judges.
var flameSample = map[string]string{"allocs": "requested_space", "copies": "copied_bytes", "retained": "inuse_space"}

// flames draws, for each profile behind a change of it, the differential
// flame graph of the revisions' first rounds into the review's flames
// folder, and names it in the change. One that cannot be drawn is left
// out.
func (m measurer) flames(it *schema.ReviewItem, ab *probe.ABResult) {
	drawn := map[string]string{}
	for i := range it.Changes {
		c := &it.Changes[i]
		kind := c.Profile[strings.LastIndex(c.Profile, " ")+1:]
		if c.Verdict != "regression" && c.Verdict != "improvement" || flameSample[kind] == "" {
			continue
		}
		if f, ok := drawn[c.Profile]; ok {
			c.Flame = f
			continue
		}
		b, a := ab.Profiles["before"][c.Profile], ab.Profiles["after"][c.Profile]
		if len(b) == 0 || len(a) == 0 {
			continue
		}
		name := filepath.Join("flames", safeName(it.Name+"_"+c.Profile)+".svg")
		if err := diffFlame(b[0], a[0], flameSample[kind], filepath.Join(m.out, name), it.Name+", "+c.Profile+": head vs base"); err != nil {
			continue
		}
		drawn[c.Profile], c.Flame = name, name
	}
}

// diffFlame writes the differential flame graph of two profiles.
func diffFlame(before, after, sample, out, title string) error {
	b, err := os.Open(before)
	if err != nil {
		return err
	}
	defer b.Close()
	a, err := os.Open(after)
	if err != nil {
		return err
	}
	defer a.Close()
	t, err := flame.ReadDiff(b, a, flame.Options{Sample: sample})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := flame.WriteSVG(&buf, t, flame.SVGOptions{Title: title}); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// runAB runs probe ab as abc says. With -timings=false it compares
// counts only, one round per revision unless -rounds says otherwise, and
// takes the base's rounds from the cache when it has them; with -cache,
// the base's rounds are kept there afterwards.
func (m measurer) runAB(ctx context.Context, abc probe.ABConfig, item string, logw io.Writer) (*probe.ABResult, error) {
	opt, cfg := m.opt, m.cfg
	var err error
	// Each revision is built by the toolchain its go.mod asks for, as
	// the go command does under GOTOOLCHAIN=auto (the default of Go's
	// own downloads; a machine's go.env may say local): a head that moves
	// go or toolchain is measured with that Go. GOTOOLCHAIN set in the
	// environment is the user's choice, and kept.
	if opt.Getenv("GOTOOLCHAIN") == "" && abc.Run.Toolchain == "" {
		abc.Run.Toolchain = "auto"
	}
	if !opt.Timings {
		abc.CountsOnly = true
		if opt.Rounds == 0 {
			abc.Rounds = 1
		}
	}
	var key string
	if opt.Cache != "" {
		if key, err = cacheKey(ctx, abc.Before, cfg, item); err != nil {
			return nil, err
		}
		runs, wt, why, ok := m.cache.lookup(key)
		switch {
		case ok && !opt.Timings:
			abc.BeforeRuns, abc.BeforeWorktree = runs, wt
			if logw != nil {
				fmt.Fprintf(logw, "the base's counts from the cache (%s)\n", filepath.Join(opt.Cache, key))
			}
		case why != "" && logw != nil:
			fmt.Fprintf(logw, "the cache's entry %s: %s\n", filepath.Join(opt.Cache, key), why)
		}
	}
	ab, err := probe.AB(ctx, abc, logw)
	if err != nil && (ab == nil || !errors.Is(err, probe.ErrNotJudged)) {
		return nil, err
	}
	if key != "" && len(abc.BeforeRuns) == 0 {
		if err := m.cache.store(key, ab); err != nil {
			return nil, fmt.Errorf("-cache: %w", err)
		}
	}
	return ab, nil
}

// windowArgs are the rounds and window lengths: the flag's, else the
// item's, else the file's.
// window sets the rounds and the windows: the review's options first,
// then the item's, then the file's; probe ab's defaults otherwise.
func (m measurer) window(abc *probe.ABConfig, rounds int, warmup, duration time.Duration) {
	if r := first(m.opt.Rounds, rounds, m.cfg.Rounds); r > 0 {
		abc.Rounds = r
	}
	if w := first(m.opt.Warmup, warmup, m.cfg.Warmup); w > 0 {
		abc.Run.Warmup = w
	}
	if d := first(m.opt.Duration, duration, m.cfg.Duration); d > 0 {
		abc.Run.Duration = d
	}
}

// countsOnly leaves out of a counts-only review's server runs what only
// timings need: the off-CPU and wall-clock windows, the slowest
// requests' bills (their figures are timings), and, unless the review's
// options, the item or the file set them, the long timing window (a
// short one warms the server up and paces the counting windows, whose
// exact figures need requests, not time).
func (m measurer) countsOnly(abc *probe.ABConfig, s Server) {
	abc.Run.OffCPU, abc.Run.Wallclock, abc.Run.NoBills = false, false, true
	if first(m.opt.Warmup, s.Warmup, m.cfg.Warmup) == 0 {
		abc.Run.Warmup = countsWarmup
	}
	if first(m.opt.Duration, s.Duration, m.cfg.Duration) == 0 {
		abc.Run.Duration = countsDuration
	}
}

// countsWarmup and countsDuration are a counts-only review's timing
// window when nothing sets it.
const (
	countsWarmup   = 300 * time.Millisecond
	countsDuration = time.Second
)

func first[T int | time.Duration](v ...T) T {
	for _, x := range v {
		if x > 0 {
			return x
		}
	}
	return 0
}

// progress prefixes probe ab's progress lines with the item's name.
func progress(w io.Writer, name string) io.Writer {
	if w == nil {
		return nil
	}
	return &prefixWriter{w: w, prefix: "  " + name + ": "}
}

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" {
			if _, err := io.WriteString(p.w, p.prefix+l); err != nil {
				return 0, err
			}
		}
	}
	return len(b), nil
}

// routeOf is the request a server without a request file is sent.
func routeOf(ab probe.ABConfig) string {
	if m := ab.Run.Method; strings.Contains(m, "/") {
		return m
	}
	path := ab.Run.Path
	if path == "" {
		path = "/"
	}
	method := ab.Run.Method
	if method == "" {
		method = "GET"
	}
	return method + " " + path
}

// changes reads probe ab's metrics as the review's: each metric's
// subject (a route, a benchmark, or route for the whole mix) and unit,
// and its gate.
func changes(ab *probe.ABResult, cfg *Config, route, per string) []schema.ReviewChange {
	var out []schema.ReviewChange
	for _, name := range ab.MetricNames() {
		m := ab.Metrics[name]
		subject, unit := route, name
		if i := strings.LastIndex(name, " "); i >= 0 {
			subject, unit = name[:i], name[i+1:]
		}
		c := schema.ReviewChange{Subject: subject, Metric: unit, Before: m.Before, After: m.After, Delta: m.Delta, DeltaPct: m.DeltaPct, Verdict: m.Verdict}
		switch {
		case unit == "retained-B/"+per:
			c.Profile = "retained"
		case unit == "compiler-copied-B/"+per:
			c.Profile = "compiler_copies"
		case unit == "goroutines-left/"+per:
			// Judged and gated; its profile's stacks are the goroutines'
			// own, not lines of the change to annotate.
		case strings.HasSuffix(unit, "allocs/"+per) || strings.HasSuffix(unit, "B/"+per) && !strings.HasPrefix(unit, "copied"):
			c.Profile = "allocs"
		case unit == "copied-B/"+per:
			c.Profile = "copies"
		case unit == "syscalls/"+per:
			c.Profile = "syscalls"
		case unit == "instructions/"+per:
			c.Profile = "instructions"
		}
		if c.Profile != "" && subject != route {
			c.Profile = subject + " " + c.Profile
		}
		if pct, gated := cfg.Gate(unit); gated {
			c.Gate = &pct
			c.Failed = m.Verdict == "regression" && (pct == 0 || m.DeltaPct > pct)
		}
		out = append(out, c)
	}
	return out
}

// verdict sets the review's verdict: fail when a gate failed, incomplete
// when an item could not be measured, not judged when no item compared a
// count, else pass.
func (r *Result) verdict() {
	counted, failed := false, 0
	for _, it := range r.Items {
		for _, c := range it.Changes {
			if c.Failed {
				r.GateFailed = append(r.GateFailed, fmt.Sprintf("%s %s %s %+.4g (%+.2f%%)", it.Name, c.Subject, c.Metric, c.Delta, c.DeltaPct))
			}
			counted = counted || IsCount(c.Metric) && c.Verdict != "not judged" && !isNaN(c.Before)
		}
		for _, why := range it.Reasons {
			r.Reasons = append(r.Reasons, it.Name+": "+why)
		}
		if it.Error != "" {
			failed++
			r.Reasons = append(r.Reasons, it.Kind+" "+it.Name+" could not be measured: "+it.Error)
		}
	}
	switch {
	case len(r.GateFailed) > 0:
		r.Verdict = "fail"
	case failed > 0:
		r.Verdict = "incomplete"
	case !counted:
		r.Verdict = "not judged"
		if len(r.Reasons) == 0 {
			r.Reasons = append(r.Reasons, "no count was measured in both revisions")
		}
	default:
		r.Verdict = "pass"
	}
}

func isNaN(f float64) bool { return f != f }

// revisions resolves the base and the head to commits.
func revisions(ctx context.Context, root string, opt Options) (base, head map[string]string, err error) {
	headRev := opt.Head
	if headRev == "" {
		headRev = "HEAD"
	}
	headSHA, err := git(ctx, root, "rev-parse", "--verify", headRev+"^{commit}")
	if err != nil {
		return nil, nil, fmt.Errorf("-head %s: %w", headRev, err)
	}
	baseRev := opt.Base
	if baseRev == "" {
		branch, err := defaultBranch(ctx, root, opt.Getenv("GITHUB_BASE_REF"))
		if err != nil {
			return nil, nil, err
		}
		mb, err := git(ctx, root, "merge-base", headSHA, branch)
		if err != nil {
			return nil, nil, fmt.Errorf("the merge base of %s and %s: %w", headRev, branch, err)
		}
		baseRev = branch
		return map[string]string{"rev": "merge-base(" + branch + ")", "commit": mb}, map[string]string{"rev": headRev, "commit": headSHA}, nil
	}
	baseSHA, err := git(ctx, root, "rev-parse", "--verify", baseRev+"^{commit}")
	if err != nil {
		return nil, nil, fmt.Errorf("-base %s: %w", baseRev, err)
	}
	return map[string]string{"rev": baseRev, "commit": baseSHA}, map[string]string{"rev": headRev, "commit": headSHA}, nil
}

// defaultBranch is the branch a review compares against: the pull
// request's base ($GITHUB_BASE_REF) or the remote's default branch, as
// the repository knows them.
func defaultBranch(ctx context.Context, root, baseRef string) (string, error) {
	var cands []string
	if baseRef != "" {
		cands = append(cands, "origin/"+baseRef, baseRef)
	} else {
		if ref, err := git(ctx, root, "symbolic-ref", "--short", "refs/remotes/origin/HEAD"); err == nil {
			cands = append(cands, ref)
		}
		cands = append(cands, "origin/main", "main", "origin/master", "master")
	}
	for _, c := range cands {
		if _, err := git(ctx, root, "rev-parse", "--verify", "-q", c+"^{commit}"); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("no base revision: none of %s exists (give -base)", strings.Join(cands, ", "))
}

// git runs git in dir (worktree.Git).
func git(ctx context.Context, dir string, args ...string) (string, error) {
	return worktree.Git(ctx, dir, args...)
}

// makeOut makes the results folder, never an existing one.
func makeOut(out, base, head string) (string, error) {
	if out == "" {
		out = filepath.Join("results", fmt.Sprintf("review_%s_%s", short(base), short(head)))
		if err := os.MkdirAll("results", 0o755); err != nil {
			return "", err
		}
	}
	if _, err := os.Lstat(out); err == nil {
		return "", fmt.Errorf("-out %s: already exists; probe never overwrites a results folder", out)
	}
	// The folders above it are made as needed, as the default's is.
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("-out %s: %w", out, err)
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		return "", fmt.Errorf("-out %s: %w", out, err)
	}
	for _, d := range []string{"servers", "benchmarks"} {
		if err := os.Mkdir(filepath.Join(out, d), 0o755); err != nil {
			return "", err
		}
	}
	return out, nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// safeName makes a folder name of s.
func safeName(s string) string {
	s = strings.Trim(unsafeName.ReplaceAllString(s, "_"), "_.")
	if s == "" {
		return "_"
	}
	return s
}

func rel(base, path string) string {
	if r, err := filepath.Rel(base, path); err == nil {
		return r
	}
	return path
}

// sortedKeys is maps.Keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
