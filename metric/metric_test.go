package metric

import (
	"flag"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/golden"
)

// TestTable: every written name belongs to one row, and Lookup finds it,
// with or without a subject; every compared metric is measured per
// request or per op, or is a rate.
func TestTable(t *testing.T) {
	seen := map[string]string{}
	for _, m := range Table {
		if m.Unit == "" || m.Source == "" {
			t.Errorf("%s: no unit or source", m.Name)
		}
		if m.Summary == "" && m.BenchSummary == "" && m.Split == "" && m.BenchSplit == "" && m.Endpoint == "" {
			t.Errorf("%s: written nowhere in summary.json", m.Name)
		}
		for _, n := range m.Names() {
			if other, ok := seen[n]; ok {
				t.Errorf("%s is written by two rows, %s and %s", n, other, m.Name)
			}
			seen[n] = m.Name
			for _, q := range []string{n, "GET /x " + n, "BenchmarkX-2 " + n} {
				if got, ok := Lookup(q); !ok || got.Name != m.Name {
					t.Errorf("Lookup(%q) = %s, %v; want %s", q, got.Name, ok, m.Name)
				}
			}
		}
	}
	if _, ok := Lookup("widgets/req"); ok {
		t.Error("Lookup found a metric that is not in the table")
	}
	if got, want := Compare("op"), []string{"ns/op", "allocs/op", "B/op", "copied-B/op", "syscalls/op", "retained-B/op", "goroutines-left/op", "instructions/op", "compiler-copied-B/op"}; !slices.Equal(got, want) {
		t.Errorf("Compare(op) = %q, want %q", got, want)
	}
	if got, want := Compare("req"), []string{"allocs/req", "B/req", "copied-B/req", "syscalls/req", "cpu-us/req", "req/s", "p99-us", "retained-B/req", "goroutines-left/req", "instructions/req"}; !slices.Equal(got, want) {
		t.Errorf("Compare(req) = %q, want %q", got, want)
	}
}

// TestProfiles: a benchmark's profiles are the ones its figures per op
// add up from.
func TestProfiles(t *testing.T) {
	if got, want := Profiles("op"), []string{"allocs", "copies", "syscalls", "retained", "goroutines_left", "offcpu", "instructions", "compiler_copies"}; !slices.Equal(got, want) {
		t.Errorf("Profiles(op) = %q, want %q", got, want)
	}
}

// TestJudgement: the names ab.json writes, and which are exact counts.
func TestJudgement(t *testing.T) {
	for j, want := range map[Judgement]string{Exact: "exact", Bytes: "bytes", Timing: "timing", Instructions: "instructions"} {
		if j.String() != want {
			t.Errorf("%d: %q, want %q", j, j.String(), want)
		}
		if j.Counted() != (j == Exact || j == Bytes) {
			t.Errorf("%s: Counted %v", want, j.Counted())
		}
	}
	// The corrected ones: the scheduler's syscalls move with timing, and
	// callgrind's counts have a spread of their own.
	for _, n := range []string{"syscalls/req", "syscalls/op", "instructions/req"} {
		if m, _ := Lookup(n); m.Judged.Counted() {
			t.Errorf("%s is judged as an exact count", n)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the table in docs/metrics.md")

// TestDoc: docs/metrics.md's table is the metric table's (go test
// ./metric -update rewrites it).
func TestDoc(t *testing.T) {
	var b strings.Builder
	b.WriteString("| figure | unit | judged as | better | summary.json | profile (sample) | written by | source |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range Table {
		better := "lower"
		if !m.HigherWorse {
			better = "higher"
		}
		var places []string
		for _, p := range []string{m.Summary, m.Split, m.BenchSummary, m.BenchSplit} {
			if p != "" {
				places = append(places, "`"+p+"`")
			}
		}
		for _, p := range [][2]string{{"endpoints[].", m.Endpoint}, {"routes[].", m.Route}, {"routes_background.", m.RouteBackground}} {
			if p[1] != "" {
				places = append(places, "`"+p[0]+p[1]+"`")
			}
		}
		prof := ""
		if m.Profile != "" {
			prof = "`" + m.Profile + "` (`" + m.Sample + "`)"
		}
		judged := m.Judged.String()
		if m.Compared {
			judged += ", compared by ab"
		}
		var writers []string
		if m.Label != "" {
			writers = append(writers, "report.md: "+m.Label+" (`"+m.SourceKey+"`)")
		}
		if m.Bench {
			writers = append(writers, "bench.txt")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", "`"+strings.Join(m.Names(), "`, `")+"`", m.Unit, judged, better, strings.Join(places, ", "), prof, strings.Join(writers, ", "), m.Source)
	}
	golden.CheckBlock(t, "../docs/metrics.md", "<!-- the metric table: go test ./metric -update -->\n", "<!-- end of the metric table -->\n", b.String(), *update)
}

// TestValues: probe ab's values are read at the table's paths, absent
// ones NaN; a row planted in the table is read with no other change.
func TestValues(t *testing.T) {
	doc := map[string]any{"per_request": map[string]any{"allocs": 3.0, "alloc_bytes": 48.0, "planted": 7.0},
		"window": map[string]any{"rps": 1000.0, "latency_us": map[string]any{"p99": 250.0}}}
	v := Values(doc, "req")
	if v["allocs/req"] != 3 || v["B/req"] != 48 || v["req/s"] != 1000 || v["p99-us"] != 250 || !math.IsNaN(v["instructions/req"]) {
		t.Errorf("values %v", v)
	}
	if got, want := slices.Sorted(maps.Keys(v)), slices.Sorted(slices.Values(Compare("req"))); !slices.Equal(got, want) {
		t.Errorf("values of %q, probe ab compares %q", got, want)
	}
	saved := Table
	defer func() { Table = saved }()
	Table = append(slices.Clone(Table), Metric{Name: "planted", Per: []string{"req"}, Judged: Exact, HigherWorse: true, Compared: true, Summary: "per_request.planted"})
	if v := Values(doc, "req"); v["planted/req"] != 7 {
		t.Errorf("a planted row: %v", v)
	}
	op := map[string]any{"per_op": map[string]any{"ns": 120.0, "allocs": 2.0}}
	v = Values(op, "op")
	if v["ns/op"] != 120 || v["allocs/op"] != 2 || !math.IsNaN(v["B/op"]) {
		t.Errorf("per op: %v", v)
	}
	if got, want := slices.Sorted(maps.Keys(v)), slices.Sorted(slices.Values(Compare("op"))); !slices.Equal(got, want) {
		t.Errorf("values of %q, probe ab compares %q per op", got, want)
	}
}

// TestNamed: the table's names per divisor, and a panic for a name or a
// divisor it does not hold.
func TestNamed(t *testing.T) {
	if AllocsOp != "allocs/op" || BytesOp != "B/op" || AllocsReq != "allocs/req" || Named("req/s", "req") != "req/s" {
		t.Errorf("%q %q %q", AllocsOp, BytesOp, AllocsReq)
	}
	for _, c := range [][2]string{{"allocz", "op"}, {"cpu-us", "op"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Named(%q, %q) did not panic", c[0], c[1])
				}
			}()
			Named(c[0], c[1])
		}()
	}
}
