package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
)

// benchUnits are the figures probe ab compares for each benchmark, in the
// report's order (the metric table's).
var benchUnits = metric.Compare("op")

// benchABMetrics lists each benchmark's metrics measured in both arms,
// judged as the metric table says.
func benchABMetrics(before, after map[string][]float64) []abMetric {
	var out []abMetric
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[name]; !ok {
			continue
		}
		m, ok := metric.Lookup(name)
		if !ok {
			continue
		}
		out = append(out, abMetric{name: name, judge: m.Judged, higherWorse: m.HigherWorse, checked: m.Judged == metric.Instructions})
	}
	// Benchmark by benchmark, each in benchUnits' order.
	unit := func(n string) int { return slices.Index(benchUnits, n[strings.LastIndex(n, " ")+1:]) }
	slices.SortStableFunc(out, func(a, b abMetric) int {
		ba, bb := a.name[:strings.LastIndex(a.name, " ")], b.name[:strings.LastIndex(b.name, " ")]
		if c := strings.Compare(ba, bb); c != 0 {
			return c
		}
		return unit(a.name) - unit(b.name)
	})
	return out
}

// benchRound measures one arm's benchmarks once: each result's figures
// per op are one value of its metrics (several with -count), its
// profiles go to the function tables.
func (ab *abRun) benchRound(ctx context.Context, r int, arm string, rc Config) error {
	bc := ab.cfg.Bench
	bc.Target, bc.Out, bc.Toolchain = rc.Target, rc.Out, rc.Toolchain
	res, err := RunBench(ctx, bc, nil)
	// A round whose figures were measured but not all given (a benchmark
	// whose instructions were refused: ErrNotJudged) or that -benchmem
	// disagrees with is judged with its reasons; one with no results is
	// the round's error.
	if err != nil && (res == nil || !errors.Is(err, ErrBenchmemMismatch) && !errors.Is(err, ErrNotJudged)) {
		return fmt.Errorf("round %d, %s: %w", r+1, arm, err)
	}
	if err != nil {
		ab.res.Reasons = append(ab.res.Reasons, fmt.Sprintf("round %d %s: %v", r+1, arm, err))
	}
	if err := ab.push(rc, r, arm, func() error { return pushBench(ctx, rc.Push, res.Dir, res.Summary, map[string]string{"arm": arm}) }); err != nil {
		return err
	}
	ab.toolchainOf(arm, res.Summary.Go)
	if err := ab.ingestBench(arm, res.Dir, res.Summary); err != nil {
		return err
	}
	return ab.pin(res.Dir)
}

// ingestBench takes one benchmark round's results folder into arm's
// figures and profiles.
func (ab *abRun) ingestBench(arm, dir string, s *schema.BenchSummary) error {
	for _, b := range s.Benchmarks {
		ab.ingestOnce(arm, b)
		for unit, x := range metric.Values(metric.Doc(b), "op") {
			ab.values[arm][b.Name+" "+unit] = append(ab.values[arm][b.Name+" "+unit], x)
		}
		for _, p := range metric.Profiles("op") {
			f, ok := b.Files[p]
			if s, steady := b.Files[p+"_steady"]; steady {
				// Per op once warm, as the figures: what a run paid
				// once is not a site's cost per op.
				f, ok = s, true
			}
			if ok {
				ab.profiles[arm][b.Name+" "+p] = append(ab.profiles[arm][b.Name+" "+p], filepath.Join(dir, f))
			}
		}
	}
	fmt.Fprintf(&ab.bench, "arm: %s\ncommit: %s\n", arm, report.ShortCommit(ab.shas[arm]))
	return report.BenchText(&ab.bench, s)
}

// ingestOnce keeps what a benchmark paid once in arm's first round that
// measured it.
func (ab *abRun) ingestOnce(arm string, b schema.BenchFigures) {
	st := b.Steady
	if st == nil {
		return
	}
	if ab.res.Once == nil {
		ab.res.Once = map[string]*schema.ABOnce{}
	}
	o := ab.res.Once[b.Name]
	if o == nil {
		o = &schema.ABOnce{}
		ab.res.Once[b.Name] = o
	}
	at := &o.Before
	if arm == "after" {
		at = &o.After
	}
	if *at != nil {
		return
	}
	x := &schema.BenchOnce{RunAllocs: st.OnceAllocs, RunBytes: st.OnceBytes}
	if b.Startup != nil {
		x.StartupAllocs, x.StartupBytes = int64(b.Startup.Allocs), int64(b.Startup.Bytes)
	}
	sites := map[string]schema.OnceSite{}
	add := func(ss []schema.OnceSite) {
		for _, s := range ss {
			t := sites[s.Func]
			t.Func, t.Allocs, t.Bytes = s.Func, t.Allocs+s.Allocs, t.Bytes+s.Bytes
			sites[s.Func] = t
		}
	}
	add(st.OnceSites)
	if st.First != nil {
		x.FirstAllocs, x.FirstBytes = st.First.Allocs, st.First.Bytes
		add(st.First.Sites)
	}
	x.Sites = slices.SortedFunc(maps.Values(sites), func(a, b schema.OnceSite) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Func, b.Func))
	})
	*at = x
}
