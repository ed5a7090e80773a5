package review

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// TestJudgeSplit: the review's own judgement of allocations and bytes.
// An unchanged route whose size-class bytes moved (the tiny allocator's
// blocks opened elsewhere) is no change; allocations under sync.Pool and
// map growth that move with the GC's cadence are no change within their
// spread, or with one round; one more allocation of the code's own is a
// regression that fails the 0% gate, whatever the pool did.
func TestJudgeSplit(t *testing.T) {
	cfg := &Config{Gates: map[string]float64{"B/req": 1}}
	round := func(own, gc [2]float64) split { return split{own: own, gc: gc} }
	for _, tc := range []struct {
		name          string
		metric        string
		vi            int
		before, after []split
		verdict       string
		failed        bool
		why           string
	}{
		{"tiny blocks moved", "B/req", 1,
			[]split{round([2]float64{1, 2}, [2]float64{})}, []split{round([2]float64{1, 2}, [2]float64{})},
			"no change", false, "the tiny allocator"},
		{"pool after each GC, one round", "allocs/req", 0,
			[]split{round([2]float64{5, 80}, [2]float64{0.2, 200})}, []split{round([2]float64{5, 80}, [2]float64{0.9, 900})},
			"no change", false, "not judged with one round"},
		{"pool within its spread", "allocs/req", 0,
			[]split{round([2]float64{5, 80}, [2]float64{0.2, 200}), round([2]float64{5, 80}, [2]float64{0.8, 800})},
			[]split{round([2]float64{5, 80}, [2]float64{0.3, 300}), round([2]float64{5, 80}, [2]float64{0.9, 900})},
			"no change", false, "within their spread"},
		{"one more of the code's own", "allocs/req", 0,
			[]split{round([2]float64{5, 80}, [2]float64{0.2, 200})}, []split{round([2]float64{6, 144}, [2]float64{0.7, 700})},
			"regression", true, "the code's own allocations 5 → 6"},
		{"a pool's few allocations in a million, apart but past no rounding", "allocs/req", 0,
			[]split{round([2]float64{1, 2}, [2]float64{0.00045, 0}), round([2]float64{1, 2}, [2]float64{0.00046, 0})},
			[]split{round([2]float64{1, 2}, [2]float64{0.0003, 0}), round([2]float64{1, 2}, [2]float64{0.00031, 0})},
			"no change", false, ""},
		{"16 B more asked for, past 1%", "B/req", 1,
			[]split{round([2]float64{5, 80}, [2]float64{})}, []split{round([2]float64{5, 96}, [2]float64{})},
			"regression", true, "bytes asked for 80 → 96"},
		{"48 B fewer", "B/req", 1,
			[]split{round([2]float64{1, 64}, [2]float64{})}, []split{round([2]float64{1, 16}, [2]float64{})},
			"improvement", false, "64 → 16"},
	} {
		c := schema.ReviewChange{Metric: tc.metric, Verdict: "regression"}
		judgeSplit(&c, tc.before, tc.after, tc.vi, cfg)
		if c.Verdict != tc.verdict || c.Failed != tc.failed || !strings.Contains(c.Why, tc.why) {
			t.Errorf("%s: %s, failed %v, why %q; want %s, %v, %q", tc.name, c.Verdict, c.Failed, c.Why, tc.verdict, tc.failed, tc.why)
		}
	}
}

// TestJudgeSplitSign: a request mix whose code asks for 12 B fewer while
// its pools' refills, within their spread, grow 56 B reads +44 B/req in
// total: the change shown is the code's own -12, an improvement, never a
// growth called one; the other way round, a regression shown as a growth.
func TestJudgeSplitSign(t *testing.T) {
	cfg := &Config{}
	round := func(own, gc float64) split { return split{own: [2]float64{1, own}, gc: [2]float64{0.1, gc}} }
	for _, tc := range []struct {
		name          string
		before, after []split
		total         float64
		verdict       string
		delta         float64
	}{
		{"own fell, the cadence grew", []split{round(2300, 300), round(2300, 380)}, []split{round(2288, 320), round(2288, 420)}, 44, "improvement", -12},
		{"own grew, the cadence fell", []split{round(2300, 320), round(2300, 420)}, []split{round(2312, 300), round(2312, 380)}, -44, "regression", 12},
		{"both the same way", []split{round(2300, 300), round(2300, 380)}, []split{round(2312, 300), round(2312, 380)}, 12, "regression", 12},
	} {
		c := schema.ReviewChange{Metric: "B/req", Verdict: "no change", Before: 2700, After: 2700 + tc.total, Delta: tc.total, DeltaPct: 100 * tc.total / 2700}
		judgeSplit(&c, tc.before, tc.after, 1, cfg)
		if c.Verdict != tc.verdict || c.Delta != tc.delta || (c.Delta > 0) != (c.DeltaPct > 0) {
			t.Errorf("%s: %s, change %v (%v%%), why %q; want %s, %v", tc.name, c.Verdict, c.Delta, c.DeltaPct, c.Why, tc.verdict, tc.delta)
		}
		if tc.total != tc.delta && !strings.Contains(c.Why, "the change shown is the code's own") {
			t.Errorf("%s: why %q does not say the change shown is the code's own", tc.name, c.Why)
		}
	}
}

// TestCadence: a sample under sync.(*Pool).Get a few times in a hundred
// requests (refills after a GC) or from the growth of a map that lives
// on follows the GC's cadence; a pool's New at every request (its objects
// never come back), a map's growth at every request (a map made per call)
// and any other allocation do not.
func TestCadence(t *testing.T) {
	fn := func(name string) *profile.Location {
		return &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: name}}}}
	}
	pool := &profile.Sample{Location: []*profile.Location{fn("main.newBuf"), fn("sync.(*Pool).Get"), fn("main.handler")}}
	grow := &profile.Sample{Location: []*profile.Location{fn("main.remember")}, Label: map[string][]string{profkey.EntryLabel: {"runtime.mapassign_faststr"}}}
	own := &profile.Sample{Location: []*profile.Location{fn("main.handler")}, Label: map[string][]string{profkey.EntryLabel: {"runtime.makeslice"}}}
	if !cadence(pool, 0.01) || cadence(pool, 1) || !cadence(pool, 0) || !cadence(grow, 0.01) || cadence(grow, 4) || cadence(own, 0.01) {
		t.Errorf("pool refills %v, pool's New per op %v, pool's bytes %v, map growth %v, per call %v, own %v",
			cadence(pool, 0.01), cadence(pool, 1), cadence(pool, 0), cadence(grow, 0.01), cadence(grow, 4), cadence(own, 0.01))
	}
}

// TestReadSplitRoutes: in a mix of two routes, a map made at every
// request of one route is that route's own (once per request of the
// route), whatever its share of the mix: 499 of 1,000 mix requests read
// 0.499 and fell on the GC's side of the threshold before; a map that
// grows now and then stays the GC's cadence.
func TestReadSplitRoutes(t *testing.T) {
	fn := &profile.Function{ID: 1, Name: "net/http.Header.Clone"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	sample := func(route string, n int64) *profile.Sample {
		return &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{n, 64 * n},
			Label: map[string][]string{profkey.EntryLabel: {"runtime.mapassign_faststr"}, profkey.RouteLabel: {route}}}
	}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "requested_space", Unit: "bytes"}},
		Sample:     []*profile.Sample{sample("GET /a", 499), sample("GET /b", 5)},
		Location:   []*profile.Location{loc}, Function: []*profile.Function{fn},
		Comments: []string{profkey.RequestsComment + "1000", profkey.RouteRequestsComment + "499 GET /a", profkey.RouteRequestsComment + "501 GET /b"},
	}
	path := filepath.Join(t.TempDir(), "allocs.pb.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sp, ok := readSplit(path, [2]string{"alloc_objects", "requested_space"})
	if !ok || sp.own[0] != 0.499 || sp.gc[0] != 0.005 {
		t.Errorf("split %+v (%v), want 0.499 own and 0.005 the GC's", sp, ok)
	}
}
