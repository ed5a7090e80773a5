package probe

// What probe ab's pages are made of (package report writes them), and
// the differential flame graph.

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"strconv"

	"github.com/perfspy/perfspy/flame"
	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/report"
)

// abPage is what report.md and report.html show of r: the metrics in
// the report's order, per request or per op, and how the arms were
// measured.
func abPage(r *ABResult, cfg ABConfig) *report.AB {
	page := &report.AB{Result: &r.ABResult, Before: r.armName("before"), After: r.armName("after"), Per: "request", Config: abConfigLine(cfg)}
	if cfg.Bench.Bench != "" {
		page.Per = "op" // a benchmark's figures are per op, everywhere
	}
	for _, m := range r.metricList(cfg) {
		page.Metrics = append(page.Metrics, m.name)
	}
	return page
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

// abConfigLine says how the arms were measured and what counts as a change.
func abConfigLine(cfg ABConfig) string {
	if r := cfg.Bench; r.Bench != "" {
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

// connsName is -conns as the report says it: 0 is the driver's default.
func connsName(n int) string {
	if n == 0 {
		return "the driver's default"
	}
	return strconv.Itoa(n)
}
