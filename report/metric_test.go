package report

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"

	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/schema"
)

// unrowed lists the JSON keys of t (a figures struct written under
// prefix) that no row of the metric table names through path.
func unrowed(t reflect.Type, prefix string, path func(metric.Metric) []string) []string {
	var named []string
	for _, m := range metric.Table {
		named = append(named, path(m)...)
	}
	var out []string
	for i := range t.NumField() {
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if !slices.Contains(named, prefix+key) {
			out = append(out, prefix+key)
		}
	}
	return out
}

// unrowedFigures lists the JSON keys of t's *float64 fields (its figures;
// the others are names, counts and totals) that no row names through
// path.
func unrowedFigures(t reflect.Type, path func(metric.Metric) []string) []string {
	var named []string
	for _, m := range metric.Table {
		named = append(named, path(m)...)
	}
	var out []string
	for i := range t.NumField() {
		if t.Field(i).Type != reflect.TypeFor[*float64]() {
			continue
		}
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if !slices.Contains(named, key) {
			out = append(out, key)
		}
	}
	return out
}

func endpointPaths(m metric.Metric) []string { return []string{m.Endpoint} }
func routePaths(m metric.Metric) []string    { return []string{m.Route, m.RouteBackground} }

func summaryPaths(m metric.Metric) []string { return []string{m.Summary, m.Split} }
func benchPaths(m metric.Metric) []string   { return []string{m.BenchSummary, m.BenchSplit} }

// TestEveryFigureHasARow: each figure summary.json writes per request,
// and the bench summary per op, is a row of the metric table; and each
// row's place in summary.json is a field there. Seen failing first on a
// planted figure.
func TestEveryFigureHasARow(t *testing.T) {
	type planted struct {
		Allocs   *float64 `json:"allocs"`
		Surprise *float64 `json:"surprise_per_req"`
	}
	if got := unrowed(reflect.TypeFor[planted](), "per_request.", summaryPaths); !slices.Equal(got, []string{"per_request.surprise_per_req"}) {
		t.Fatalf("the planted figure: %q", got)
	}
	for _, c := range []struct {
		t      reflect.Type
		prefix string
		path   func(metric.Metric) []string
	}{
		{reflect.TypeFor[schema.PerRequest](), "per_request.", summaryPaths},
		{reflect.TypeFor[schema.BenchPerOp](), "per_op.", benchPaths},
	} {
		for _, k := range unrowed(c.t, c.prefix, c.path) {
			t.Errorf("%s is written but has no row in the metric table", k)
		}
	}
	// Each request of a mix alone (endpoints[]) and the mix split by
	// route (routes[], routes_background): every figure is a row's.
	if got := unrowedFigures(reflect.TypeFor[planted](), endpointPaths); !slices.Equal(got, []string{"surprise_per_req"}) {
		t.Fatalf("the planted endpoint figure: %q", got)
	}
	for _, k := range unrowedFigures(reflect.TypeFor[schema.EndpointSummary](), endpointPaths) {
		t.Errorf("endpoints[].%s is written but has no row in the metric table", k)
	}
	for _, k := range unrowedFigures(reflect.TypeFor[schema.RouteSummary](), routePaths) {
		t.Errorf("routes[].%s is written but has no row in the metric table", k)
	}
	// The other way: every row's path is a field.
	for _, m := range metric.Table {
		for _, p := range []string{m.Summary, m.Split, m.BenchSummary, m.BenchSplit} {
			if p != "" && !jsonPath(reflect.TypeFor[schema.Summary](), p) && !jsonPath(reflect.TypeFor[schema.BenchFigures](), p) {
				t.Errorf("metric %s: %s is in neither summary.json nor a benchmark's figures", m.Name, p)
			}
		}
		for _, p := range []string{"endpoints." + m.Endpoint, "routes." + m.Route, "routes_background." + m.RouteBackground} {
			if !strings.HasSuffix(p, ".") && !jsonPath(reflect.TypeFor[schema.Summary](), p) {
				t.Errorf("metric %s: %s is not in summary.json", m.Name, p)
			}
		}
	}
}

// jsonPath reports whether the dotted path of JSON keys reaches a field
// of t (a map's key is any key; a slice's elements are the objects the
// key is in).
func jsonPath(t reflect.Type, path string) bool {
	for _, key := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem()
			continue
		case reflect.Struct:
		default:
			return false
		}
		found := false
		for i := range t.NumField() {
			if k, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); k == key {
				t, found = t.Field(i).Type, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestBenchTextUnits: every unit bench.txt writes (a run's, an
// instructions run's, -bench's) is a row of the metric table, and the
// units it marks assume=exact are the rows judged as exact counts.
func TestBenchTextUnits(t *testing.T) {
	one := func() *float64 { return f64(1) }
	run := &schema.Summary{Window: schema.WindowSummary{Requests: 100, RPS: 1000, LatencyUS: map[string]int64{"p50": 1, "p99": 2, "p999": 3}},
		PerRequest: schema.PerRequest{Allocs: one(), AllocBytes: one(), CopiedBytes: one(), ClearedBytes: one(), Syscalls: one(), CPUUS: one(),
			RetainedBytes: one(), GoroutinesLeft: one()}, DatagramsPerRequest: one()}
	instr := &schema.Summary{Window: schema.WindowSummary{Requests: 100}, PerRequest: schema.PerRequest{Instructions: one()}}
	bench := &schema.BenchSummary{Benchmarks: []schema.BenchFigures{{Name: "BenchmarkX-2", N: 10, PerOp: schema.BenchPerOp{Allocs: 1, AllocBytes: 1,
		CopiedBytes: one(), ClearedBytes: one(), Syscalls: one(), NS: one(), RetainedBytes: one(), GoroutinesLeft: one()}}}}
	var texts []string
	for _, s := range []*schema.Summary{run, instr} {
		var b bytes.Buffer
		if err := RunBenchText(&b, s, "x", nil); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, b.String())
	}
	var b bytes.Buffer
	if err := BenchText(&b, bench); err != nil {
		t.Fatal(err)
	}
	texts = append(texts, b.String())
	units := 0
	for _, text := range texts {
		r := benchfmt.NewReader(strings.NewReader(text), "bench.txt")
		exact := map[string]bool{}
		var written []string
		for r.Scan() {
			switch rec := r.Result().(type) {
			case *benchfmt.UnitMetadata:
				if rec.Key == "assume" && rec.Value == "exact" {
					exact[rec.Unit] = true
				}
			case *benchfmt.Result:
				for _, v := range rec.Values {
					u := v.Unit
					if v.OrigUnit != "" {
						u = v.OrigUnit // the reader makes ns/op sec/op
					}
					written = append(written, u)
				}
			case *benchfmt.SyntaxError:
				t.Fatal(rec)
			}
		}
		for _, u := range written {
			units++
			m, ok := metric.Lookup(u)
			if !ok {
				t.Errorf("bench.txt writes %s, which has no row in the metric table", u)
				continue
			}
			if exact[u] != m.Judged.Counted() {
				t.Errorf("bench.txt: %s assume=exact is %v, but the table judges it %s", u, exact[u], m.Judged)
			}
		}
	}
	if units < 20 {
		t.Errorf("only %d units written: the summaries above lost their figures", units)
	}
}
