package wire

import (
	"cmp"
	"slices"
)

// RankBills orders bills slowest first by server-side duration (ties in
// the order the requests began) and names the two groups a tail is
// explained by: the slowest 1%, rounded down so that every request of a
// 1-in-100 path is in it when those are the slowest, at least one; and as
// many bills around the median. probe run's window (package bills) and
// live mode's periods (agent/live) both rank with it, so that a period's
// tail is the window's tail.
func RankBills(bills []Bill) (order, slow, median []Bill) {
	order = slices.Clone(bills)
	slices.SortStableFunc(order, func(a, b Bill) int { return cmp.Compare(b.DurationNS, a.DurationNS) })
	if len(order) == 0 {
		return order, nil, nil
	}
	// No min and max: the agent's packages compile at go 1.18.
	n := len(order) / 100
	if n < 1 {
		n = 1
	}
	mid := len(order)/2 - n/2
	if mid > len(order)-n {
		mid = len(order) - n
	}
	if mid < 0 {
		mid = 0
	}
	return order, order[:n], order[mid : mid+n]
}
