package probe

// The statistics of probe ab: each metric of the arms' rounds compared
// (exact counts, or Mann-Whitney U on timings), reusable without the
// rendering.

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/schema"
)

type abMetric struct {
	name        string
	judge       metric.Judgement
	higherWorse bool
	// checked says that each value already repeats within insSpread of
	// itself (a benchmark's instructions per op: two runs under
	// callgrind agreed, or it was refused): one round an arm judges it.
	checked bool
}

// abMetricsOf are the named metrics as the table judges them.
func abMetricsOf(names ...string) []abMetric {
	out := make([]abMetric, len(names))
	for i, n := range names {
		m, ok := metric.Lookup(n)
		if !ok {
			panic("probe: metric " + n + " is not in the metric table")
		}
		out[i] = abMetric{name: n, judge: m.Judged, higherWorse: m.HigherWorse}
	}
	return out
}

// The metrics probe ab compares, in the metric table's order: a run's
// (what requests leave behind, retained-B/req and goroutines-left/req,
// is counted exactly: a new leak is a regression whatever the timings
// say), an instructions run's, and each endpoint's of a request file
// (no rates or latencies per endpoint).
var (
	abMetrics, instructionMetrics = splitInstructions(abMetricsOf(metric.Compare("req")...))
	endpointUnits                 = abMetricsOf(endpointNames()...)
)

// endpointNames are the figures probe ab compares per endpoint: the
// compared rows that an endpoints[] object holds.
func endpointNames() []string {
	var out []string
	for _, m := range metric.Table {
		if m.Compared && m.Endpoint != "" {
			out = append(out, m.Name+"/req")
		}
	}
	return out
}

// splitInstructions parts callgrind's counts (an instructions run
// measures nothing else) from the rest.
func splitInstructions(ms []abMetric) (rest, instructions []abMetric) {
	for _, m := range ms {
		if m.judge == metric.Instructions {
			instructions = append(instructions, m)
		} else {
			rest = append(rest, m)
		}
	}
	return rest, instructions
}

// metricsFor returns the metrics a configuration measures.
func metricsFor(c Config) []abMetric {
	if c.Instructions {
		return instructionMetrics
	}
	return abMetrics
}

// endpointValues reads one endpoint's figures for endpointUnits: each
// row's Endpoint key in e; NaN when not measured.
func endpointValues(e schema.EndpointSummary) map[string]float64 {
	out := map[string]float64{}
	for _, m := range metric.Table {
		if m.Compared && m.Endpoint != "" {
			v, ok := jsonFigure(e, m.Endpoint)
			if !ok {
				v = math.NaN()
			}
			out[m.Name+"/req"] = v
		}
	}
	return out
}

// routeValues reads one route's figures of the mix (each row's Route
// key in r), the ones it has.
func routeValues(r schema.RouteSummary) map[string]float64 {
	out := map[string]float64{}
	for _, m := range metric.Table {
		if m.Compared && m.Route != "" {
			if v, ok := jsonFigure(r, m.Route); ok {
				out[m.Name+"/req"] = v
			}
		}
	}
	return out
}

// jsonFigure is the *float64 field of struct v whose JSON key is key;
// false when there is none or it is null.
func jsonFigure(v any, key string) (float64, bool) {
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if k, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ","); k == key {
			if p, ok := rv.Field(i).Interface().(*float64); ok && p != nil {
				return *p, true
			}
			return 0, false
		}
	}
	return 0, false
}

// endpointABMetrics lists each endpoint's metrics measured in both arms
// ("GET /x allocs/req"), endpoint by endpoint in name order.
func endpointABMetrics(before, after map[string][]float64) []abMetric {
	var out []abMetric
	names := map[string]bool{}
	for k := range before {
		for _, u := range endpointUnits {
			if e, ok := strings.CutSuffix(k, " "+u.name); ok && e != "" && len(after[k]) > 0 {
				names[e] = true
			}
		}
	}
	for _, e := range slices.Sorted(maps.Keys(names)) {
		for _, u := range endpointUnits {
			if len(before[e+" "+u.name]) > 0 && len(after[e+" "+u.name]) > 0 {
				out = append(out, abMetric{name: e + " " + u.name, judge: u.judge, higherWorse: u.higherWorse})
			}
		}
	}
	return out
}

// metricValues reads a run's figures for the metrics probe ab compares,
// at the paths metric's table gives them in summary.json; NaN when absent.
func metricValues(s *schema.Summary) map[string]float64 {
	return metric.Values(metric.Doc(s), "req")
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

// TailParts are the first keys of ab.json's tail: the slowest 1%'s
// server-side duration, then its time by part (wire.BillParts), µs per
// request. The places its own goroutines waited follow, each keyed
// TailWaitPrefix, part, function and site.
var TailParts = append([]string{"duration"}, wire.BillParts...)

// TailWaitPrefix begins the tail's keys of wait places.
const TailWaitPrefix = "wait "

// tailValues reads a run's slowest 1% mean bill by TailParts and by the
// places it waited; none without bills.
func tailValues(s *schema.Summary) map[string]float64 {
	if s.Bills == nil || s.Bills.Groups["p99"] == nil {
		return nil
	}
	g := s.Bills.Groups["p99"]
	out := map[string]float64{"duration": g.DurationUS}
	for _, p := range wire.BillParts {
		out[p] = g.TimeUS[p]
	}
	for _, w := range g.Waits {
		out[TailWaitPrefix+w.Part+" "+w.Func+" "+w.Site] += w.US
	}
	return out
}

// compareTails compares the arms' slowest 1% by part, as timings (a
// Mann-Whitney U over the rounds): what the tail's own bills say moved.
// It gives no verdict of its own (the rounds' tails are few requests,
// and nine parts compared at p 0.05 would raise false alarms): a reader
// names the parts that moved beside a p99 that did.
func compareTails(before, after map[string][]float64) map[string]*schema.ABMetric {
	if len(before["duration"]) == 0 || len(after["duration"]) == 0 {
		return nil
	}
	out := map[string]*schema.ABMetric{}
	for _, p := range TailParts {
		out[p] = compareMetric(before[p], after[p], metric.Timing, true)
	}
	// A place a round's tail did not wait at is 0 in that round.
	pad := func(v []float64, rounds int) []float64 {
		for len(v) < rounds {
			v = append(v, 0)
		}
		return v
	}
	places := map[string]bool{}
	for _, m := range []map[string][]float64{before, after} {
		for k := range m {
			places[k] = strings.HasPrefix(k, TailWaitPrefix)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(places)) {
		if !places[k] {
			continue
		}
		out[k] = compareMetric(pad(slices.Clone(before[k]), len(before["duration"])), pad(slices.Clone(after[k]), len(after["duration"])), metric.Timing, true)
	}
	return out
}

// compareMetric judges one metric. Counts are exact: a change beyond
// rounding (0.5% and 0.02; for bytes, 0.5% and one byte: the background
// work every goroutine's count holds, such as one 40-byte copy in 2000
// ops, is not a change of the code under review) is one. Timings need a Mann-Whitney U p < 0.05
// and a change of more than 2%. Instruction counts repeat to a fraction of
// a percent but not exactly: a change is one when no run of one arm falls
// within the other's range and the medians differ by more than 0.1% and
// by more than twice the wider arm's spread.
//
// A checked figure (abMetric.checked) needs one round an arm: a change
// is one past twice the spread each value was checked to (0.2%).
func compareMetric(b, a []float64, judge metric.Judgement, higherWorse bool, checked ...bool) *schema.ABMetric {
	m := &schema.ABMetric{Before: medianOf(b), After: medianOf(a), P: 1, JudgedAs: judge.String()}
	m.Delta = m.After - m.Before
	if m.Before != 0 {
		m.DeltaPct = 100 * m.Delta / m.Before
	}
	if math.IsNaN(m.Before) || math.IsNaN(m.After) {
		return &schema.ABMetric{P: 1, Verdict: "not measured", JudgedAs: judge.String()}
	}
	th := benchmath.DefaultThresholds
	c := benchmath.AssumeNothing.Compare(benchmath.NewSample(b, &th), benchmath.NewSample(a, &th))
	if !math.IsNaN(c.P) {
		m.P = c.P
	}
	changed := false
	switch judge {
	case metric.Exact:
		changed = math.Abs(m.Delta) > math.Max(0.005*math.Abs(m.Before), 0.02)
	case metric.Bytes:
		changed = math.Abs(m.Delta) > math.Max(0.005*math.Abs(m.Before), 1)
	case metric.Instructions:
		if len(checked) > 0 && checked[0] && (len(b) < 2 || len(a) < 2) {
			changed = math.Abs(m.Delta) > math.Max(2*insSpread*math.Abs(m.Before), 2)
			break
		}
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
