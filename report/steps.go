package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/schema"
)

// Steps writes probe run -rate-steps's report.md: a row per rate, how the
// latency and a request's cost grow with the load, and the knee.
func Steps(w io.Writer, r *schema.StepsResult) {
	fmt.Fprintf(w, "# probe run -rate-steps: %s\n\n", safetext.Markdown(r.Target))
	fmt.Fprintf(w, "One open-loop run per rate (%s arrivals); latency from each request's intended send time, the raw p99 from its actual send; every other figure per request, from each run's own windows.\n\n", r.Arrivals)
	fmt.Fprint(w, "| rate | verdict | req/s | p50 µs | p99 µs | p99.9 µs | raw p99 µs | late / dropped sends | CPU µs | allocs | B | off-CPU µs |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Steps {
		fmt.Fprintf(w, "| %g | %s | %.0f | %d | %d | %d | %d | %d / %d | %s | %s | %s | %s |\n", s.Rate, s.Verdict, s.RPS,
			s.LatencyUS["p50"], s.LatencyUS["p99"], s.LatencyUS["p999"], s.LatencyRawUS["p99"], s.LateSends, s.DroppedSends,
			fmtPtr(s.CPUUS, 2), fmtPtr(s.Allocs, 2), fmtPtr(s.AllocBytes, 0), offCPUTotal(s.OffCPUUS))
	}
	if r.Stopped != "" {
		fmt.Fprintf(w, "\n**Stopped**: %s; that rate and the ones after it were not measured (finished: %d).\n", safetext.Markdown(r.Stopped), len(r.Steps))
	}
	if r.Knee > 0 {
		fmt.Fprintf(w, "\n**Knee at %g req/s**: %s.\n", r.Knee, r.KneeWhy)
	} else if r.Stopped != "" {
		fmt.Fprint(w, "\nNo knee within the steps that finished.\n")
	} else {
		fmt.Fprint(w, "\nNo knee within these rates: every step held its rate with a p99 within twice the first step's.\n")
	}
}

// StepsTerminal prints the steps' table in short.
func StepsTerminal(w io.Writer, r *schema.StepsResult, dir string) {
	fmt.Fprintf(w, "%s  rate steps (%s arrivals)\n", r.Target, r.Arrivals)
	for _, s := range r.Steps {
		fmt.Fprintf(w, "  %8g/s  %-10s p50 %6dµs  p99 %7dµs  raw p99 %6dµs  cpu %s µs/req  allocs %s /req  off-CPU %s µs/req  dropped %d\n", s.Rate, s.Verdict,
			s.LatencyUS["p50"], s.LatencyUS["p99"], s.LatencyRawUS["p99"], fmtPtr(s.CPUUS, 2), fmtPtr(s.Allocs, 2), offCPUTotal(s.OffCPUUS), s.DroppedSends)
	}
	if r.Knee > 0 {
		fmt.Fprintf(w, "  knee          %g req/s: %s\n", r.Knee, r.KneeWhy)
	}
	fmt.Fprintf(w, "  results       %s\n", dir)
}

// offCPUTotal is a request's time off CPU, every reason's summed.
func offCPUTotal(m map[string]float64) string {
	if m == nil {
		return "n/a"
	}
	var t float64
	for _, v := range m {
		t += v
	}
	return strconv.FormatFloat(t, 'f', 2, 64)
}
