package probe

import (
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/schema"
)

// SummarySchema is the schema name of summary.json.
const SummarySchema = schema.SummarySchema

// Verdicts.
const (
	VerdictServerBound = schema.VerdictServerBound
	VerdictNotJudged   = schema.VerdictNotJudged
)

func f64(v float64) *float64 { return &v }

// writeJSON writes v indented, with a final newline. encoding/json sorts map
// keys, so the output is deterministic.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// benchMetric is one figure of bench.txt; Exact marks the figures the
// metric table judges as exact counts.
type benchMetric struct {
	Value float64
	Unit  string
	Exact bool
}

// writeBench writes s in the Go benchmark format that benchstat reads: the
// configuration as "key: value" lines, Unit lines that mark counts exact,
// then one result line whose iteration count is the window's requests.
func writeBench(w io.Writer, s *Summary, name string, config map[string]string) error {
	ms := benchMetrics(s)
	bw := benchfmt.NewWriter(w)
	for _, m := range ms {
		if m.Exact {
			u := &benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: m.Unit, Key: "assume"}, OrigUnit: m.Unit, Value: "exact"}
			if err := bw.Write(u); err != nil {
				return err
			}
		}
	}
	res := &benchfmt.Result{Name: benchfmt.Name(benchName(name)), Iters: int(s.Window.Requests)}
	for _, k := range slices.Sorted(maps.Keys(config)) {
		res.Config = append(res.Config, benchfmt.Config{Key: k, Value: []byte(config[k]), File: true})
	}
	for _, m := range ms {
		// Four decimals at most, as the figures are rounded elsewhere.
		res.Values = append(res.Values, benchfmt.Value{Value: round(m.Value, 4), Unit: m.Unit})
	}
	return bw.Write(res)
}

// benchMetrics are the figures of bench.txt, in their order.
func benchMetrics(s *Summary) []benchMetric {
	var ms []benchMetric
	add := func(v *float64, unit string) {
		if v != nil {
			ms = append(ms, benchMetric{*v, unit, exactUnit(unit)})
		}
	}
	if s.PerRequest.Instructions != nil {
		// An instructions window is paced and slowed by callgrind: its
		// rate and latencies say nothing of the target.
		add(s.PerRequest.Instructions, "instructions/req")
		return ms
	}
	add(&s.Window.RPS, "req/s")
	add(s.PerRequest.CPUUS, "cpu-us/req")
	add(s.PerRequest.Allocs, "allocs/req")
	add(s.PerRequest.AllocBytes, "B/req")
	add(s.PerRequest.CopiedBytes, "copied-B/req")
	add(s.PerRequest.ClearedBytes, "cleared-B/req")
	add(s.PerRequest.Syscalls, "syscalls/req")
	add(s.PerRequest.RetainedBytes, "retained-B/req")
	add(s.PerRequest.GoroutinesLeft, "goroutines-left/req")
	add(s.DatagramsPerRequest, "datagrams/req")
	for _, q := range []string{"p50", "p99", "p999"} {
		if v, ok := s.Window.LatencyUS[q]; ok {
			f := float64(v)
			add(&f, q+"-us")
		}
	}
	return ms
}

// exactUnit reports whether the metric table judges unit as an exact
// count: bench.txt marks it assume=exact, so that benchstat calls any
// change significant.
func exactUnit(unit string) bool {
	m, ok := metric.Lookup(unit)
	return ok && m.Judged.Counted()
}

// benchName makes a benchmark name from a target name: no spaces, first
// letter upper case.
func benchName(target string) string {
	var b strings.Builder
	for _, r := range target {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if n == "" {
		return "Probe"
	}
	return "Probe/" + n
}
