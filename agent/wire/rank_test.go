package wire

import "testing"

// TestRankBills holds the groups' sizes and places: the slowest 1% rounded
// down (at least one), as many around the median, and ties kept in the
// order the requests began.
func TestRankBills(t *testing.T) {
	bills := func(n int) []Bill {
		b := make([]Bill, n)
		for i := range b {
			// Durations 1..n, shuffled by a stride coprime with n's used here.
			b[i] = Bill{DurationNS: uint64((i*7)%n + 1)}
		}
		return b
	}
	for _, tc := range []struct {
		n, slow  int
		slowest  uint64 // the first slow bill's duration
		medianAt uint64 // the first median bill's duration
	}{
		{1, 1, 1, 1},
		{2, 1, 2, 1},
		{99, 1, 99, 50},
		{100, 1, 100, 50},
		{250, 2, 250, 126},
	} {
		order, slow, median := RankBills(bills(tc.n))
		if len(order) != tc.n || len(slow) != tc.slow || len(median) != tc.slow {
			t.Errorf("%d bills: order %d, slow %d, median %d; want %d, %d, %d", tc.n, len(order), len(slow), len(median), tc.n, tc.slow, tc.slow)
			continue
		}
		if slow[0].DurationNS != tc.slowest || median[0].DurationNS != tc.medianAt {
			t.Errorf("%d bills: slowest %d, median group from %d; want %d and %d", tc.n, slow[0].DurationNS, median[0].DurationNS, tc.slowest, tc.medianAt)
		}
	}
	order, slow, median := RankBills(nil)
	if len(order)+len(slow)+len(median) != 0 {
		t.Errorf("no bills: %d, %d, %d", len(order), len(slow), len(median))
	}
	// Ties: the order the requests began.
	tied := []Bill{{DurationNS: 5, Route: "a"}, {DurationNS: 5, Route: "b"}, {DurationNS: 9, Route: "c"}}
	if order, _, _ := RankBills(tied); order[0].Route != "c" || order[1].Route != "a" || order[2].Route != "b" {
		t.Errorf("ties: %v", order)
	}
}
