package report

import (
	"strings"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestTailMoves: a tail that moved names the parts that moved with it, and
// only those; a tail that did not move says nothing, whatever its parts
// did (nine parts compared would raise false alarms of their own).
func TestTailMoves(t *testing.T) {
	m := func(before, after float64, verdict string) *schema.ABMetric {
		return &schema.ABMetric{Before: before, After: after, Delta: after - before, P: 0.008, Verdict: verdict}
	}
	tail := map[string]*schema.ABMetric{
		"duration": m(100, 2100, "regression"),
		"cpu":      m(40, 41, "no change"),
		"sync":     m(10, 1910, "regression"),
		"sleep":    m(0, 0.4, "regression"), // under a microsecond
		"sched":    m(50, 149, "regression"),
		"wait sync sync.(*Mutex).Lock /src/my app/cache.go:88": m(5, 1805, "regression"),
		"wait sync main.other /src/main.go:9":                  m(5, 5.5, "regression"),
		"wait net net.(*netFD).Read /src/main.go:20":           m(5, 600, "no change"),
	}
	got := TailMoves(tail)
	want := "the slowest 1%'s own bills: +2000 µs a request (100 → 2100, p 0.008): +1900 µs sync, +99 µs sched, +1800 µs waiting in sync at sync.(*Mutex).Lock (cache.go:88)"
	if got != want {
		t.Errorf("TailMoves:\n got %s\nwant %s", got, want)
	}
	tail["duration"] = m(100, 101, "no change")
	if got := TailMoves(tail); got != "" {
		t.Errorf("a tail that did not move: %q", got)
	}
	if got := TailMoves(nil); got != "" {
		t.Errorf("no tail: %q", got)
	}
	var b strings.Builder
	tail["duration"] = m(100, 2100, "regression")
	writeTailTable(&b, tail)
	if !strings.Contains(b.String(), "| sync | 10.0 | 1910.0 | +1900.0 | 0.008 | regression |") || !strings.Contains(b.String(), "The slowest 1%'s own bills: +2000") {
		t.Errorf("ab's tail table:\n%s", b.String())
	}
}
