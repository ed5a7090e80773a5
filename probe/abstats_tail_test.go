package probe

import "testing"

// TestCompareTails: the tail's parts compare round by round, and a place
// the tail waited at in some rounds only counts 0 in the others (not a
// shorter sample); no bills, no tail.
func TestCompareTails(t *testing.T) {
	four := func(v float64) []float64 { return []float64{v, v + 1, v + 2, v + 3} }
	place := TailWaitPrefix + "sync sync.(*Mutex).Lock /src/cache.go:88"
	before := map[string][]float64{"duration": four(100), "sync": four(10), place: {40, 40}}
	after := map[string][]float64{"duration": four(2000), "sync": four(1900), place: four(1800)}
	got := compareTails(before, after)
	if d := got["duration"]; d.Verdict != "regression" || d.Before != 101.5 {
		t.Errorf("duration %+v", d)
	}
	if p := got[place]; p == nil || p.Verdict != "regression" || p.Before != 20 || p.After != 1801.5 {
		t.Errorf("the place: %+v (want before's median 20: two rounds of 40, two of 0)", p)
	}
	if got["cpu"].Verdict != "not measured" {
		t.Errorf("cpu, in neither arm: %+v", got["cpu"])
	}
	if compareTails(map[string][]float64{}, after) != nil {
		t.Error("a tail without bills in one arm")
	}
}
