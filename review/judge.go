package review

// The review's own judgement of allocations and bytes, read again from
// their profiles before any gate. probe ab judges a metric's total as an
// exact count; two things move such totals with no change to the code:
//
//   - size-class bytes: the tiny allocator packs small pointer-free
//     objects into 16-byte blocks and charges the block's bytes to the
//     site that opens it, so new tiny allocations anywhere move other
//     sites' bytes. The bytes the code asked for (requested_space) do
//     not move: they are what the review gates.
//   - allocations, copies and memory left live that follow the GC's
//     cadence, not the requests: a sync.Pool's New runs after each GC
//     empties the pool, and a map's growth (its new groups, the entries
//     it moves, the groups it keeps) happens at the insert that crosses
//     its load, wherever the window starts. These (a stack through
//     sync.(*Pool).Get, or the label entry runtime.mapassign*) are judged
//     by their spread across rounds; every other allocation, copy and
//     byte left live stays an exact count.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// cadence reports whether a sample's allocations follow the GC's cadence
// rather than the requests. perReq is its allocations per request (op):
// a map that grows at half the requests or more is made per request (its
// groups come at every request's inserts), not one that lives on and
// grows now and then; a pool's New that runs at half the requests or
// more is the code's own (its objects do not come back: a Put deleted,
// a Put of another object), not the refills after a GC empties it,
// which come a few per cycle. A figure with no count per request (bytes
// copied, bytes left live) is the cadence's under either.
func cadence(s *profile.Sample, perReq float64) bool {
	if e := s.Label[profkey.EntryLabel]; len(e) == 1 && strings.HasPrefix(e[0], "runtime.mapassign") {
		return perReq < perRequest
	}
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil && l.Function.Name == "sync.(*Pool).Get" {
				return perReq < perRequest
			}
		}
	}
	return false
}

// perRequest is the count per request (op) from which a map's growth or
// a pool's New is the request's own: a map made per call grows at each
// (its first group at least), one that lives on grows once per doubling;
// a pool whose objects never come back makes one at each Get, one that
// gets them back makes a few after each GC.
const perRequest = 0.5

// split is one round's allocations per request (op), objects and
// requested bytes: the code's own, and those that follow the GC's
// cadence.
type split struct{ own, gc [2]float64 }

// readSplit reads one round's profile, a count and a byte sample type
// (types); false when it lacks one (the heap profile has no requested
// bytes) or has no requests.
func readSplit(path string, types [2]string) (split, bool) {
	p, err := readProfile(path)
	if err != nil {
		return split{}, false
	}
	n := profkey.Requests(p)
	oi := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == types[0] })
	bi := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == types[1] })
	if n <= 0 || oi < 0 || bi < 0 {
		return split{}, false
	}
	var sp split
	routes := profkey.RouteRequests(p)
	for _, s := range p.Sample {
		part := &sp.own
		// A map made per call is told by its allocations per request;
		// a copy count or what is left live is not (one growth of a map
		// that lives on moves many entries, keeps many groups). In a
		// request mix, per request of the route that made it: a map
		// made at every request of one route of two is 0.5 per request
		// of the mix, on the threshold, and fell on either side of it
		// from window to window (gin's Header.Clone: 27,834 of 55,668
		// requests, then 27,268 of 54,535).
		perReq := 0.0
		if types[0] == "alloc_objects" {
			perReq = perItsRequest(s, s.Value[oi], n, routes)
		}
		if cadence(s, perReq) {
			part = &sp.gc
		}
		part[0] += float64(s.Value[oi]) / float64(n)
		part[1] += float64(s.Value[bi]) / float64(n)
	}
	return sp, true
}

// perItsRequest is a sample's count v per request of the route that
// made it (its route label, among the window's routes), else per request
// of the window's n.
func perItsRequest(s *profile.Sample, v, n int64, routes map[string]int64) float64 {
	if r := s.Label[profkey.RouteLabel]; len(r) == 1 && routes[r[0]] > 0 {
		n = routes[r[0]]
	}
	return float64(v) / float64(n)
}

// readSplits reads every round of an arm; nil when any cannot be read.
func readSplits(files []string, types [2]string) []split {
	var out []split
	for _, f := range files {
		sp, ok := readSplit(f, types)
		if !ok {
			return nil
		}
		out = append(out, sp)
	}
	return out
}

// figureOf reads one figure of a round: objects (0) or bytes (1), own or
// the GC cadence's.
type figureOf func(split) float64

func median(rounds []split, f figureOf) float64 {
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func bounds(rounds []split, f figureOf) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range rounds {
		lo, hi = min(lo, f(r)), max(hi, f(r))
	}
	return lo, hi
}

// exactChanged says whether an exact count moved past rounding, as probe
// ab judges exact counts: by more than 0.02 and 0.5%, and bytes by at
// least one byte.
func exactChanged(before, after float64, bytes bool) bool {
	d := math.Abs(after - before)
	return d > 0.02 && d > 0.005*math.Abs(before) && (!bytes || d >= 1)
}

// spreadChanged says whether a figure that follows the GC's cadence
// moved beyond its spread: the arms' rounds do not overlap and the
// medians differ by more than twice the wider arm's spread. With fewer
// than two rounds in an arm it cannot be judged.
func spreadChanged(before, after []split, f figureOf) (changed, judged bool) {
	if len(before) < 2 || len(after) < 2 {
		return false, false
	}
	blo, bhi := bounds(before, f)
	alo, ahi := bounds(after, f)
	spread := max(bhi-blo, ahi-alo)
	overlap := alo <= bhi && blo <= ahi
	return !overlap && math.Abs(median(after, f)-median(before, f)) > 2*spread, true
}

// rejudge judges each allocation count and byte figure of it again from
// its rounds' profiles (see the file's comment), and its gate with it.
func rejudge(it *schema.ReviewItem, ab *probe.ABResult, cfg *Config) {
	for i := range it.Changes {
		c := &it.Changes[i]
		var types [2]string
		vi := 0
		switch {
		case strings.HasSuffix(c.Profile, "allocs") && strings.HasPrefix(c.Metric, "allocs/"):
			types = [2]string{"alloc_objects", "requested_space"}
		case strings.HasSuffix(c.Profile, "allocs") && strings.HasPrefix(c.Metric, "B/"):
			types, vi = [2]string{"alloc_objects", "requested_space"}, 1
		case strings.HasSuffix(c.Profile, "copies") && strings.HasPrefix(c.Metric, "copied-B/"):
			types, vi = [2]string{"copy_calls", "copied_bytes"}, 1
		case strings.HasSuffix(c.Profile, "retained") && strings.HasPrefix(c.Metric, "retained-B/"):
			types, vi = [2]string{"inuse_objects", "inuse_space"}, 1
		default:
			continue
		}
		before, after := readSplits(ab.Profiles["before"][c.Profile], types), readSplits(ab.Profiles["after"][c.Profile], types)
		if len(before) == 0 || len(after) == 0 {
			continue
		}
		judgeSplit(c, before, after, vi, cfg)
	}
}

// judgeSplit sets c's verdict, why and gate from its rounds' splits.
func judgeSplit(c *schema.ReviewChange, before, after []split, vi int, cfg *Config) {
	own := func(s split) float64 { return s.own[vi] }
	gc := func(s split) float64 { return s.gc[vi] }
	ob, oa, gb, ga := median(before, own), median(after, own), median(before, gc), median(after, gc)
	what := "allocations"
	switch {
	case strings.HasPrefix(c.Metric, "copied-"):
		what = "bytes copied"
	case strings.HasPrefix(c.Metric, "retained-"):
		what = "bytes left live"
	case vi == 1:
		what = "bytes asked for"
	}
	ownMoved := exactChanged(ob, oa, vi == 1)
	gcMoved, gcJudged := spreadChanged(before, after, gc)
	// Beyond its spread, and past rounding too, as an exact count is: a
	// few allocations in a million requests is no change either way.
	gcMoved = gcMoved && exactChanged(gb, ga, vi == 1)
	// Say how it was judged where that tells more than the figure:
	// when the GC's cadence had a part in it, or when the bytes asked for
	// moved otherwise than the size-class bytes shown.
	material := func(v float64) bool { return vi == 0 && math.Abs(v) >= 0.01 || vi == 1 && math.Abs(v) >= 1 }
	showGC := material(gb) || material(ga)
	var why []string
	if showGC || vi == 1 && math.Abs((oa-ob)-c.Delta) >= 1 {
		why = append(why, fmt.Sprintf("the code's own %s %s → %s", what, num(ob), num(oa)))
	}
	if showGC {
		note := "within their spread across rounds"
		switch {
		case !gcJudged:
			note = "not judged with one round per revision"
		case gcMoved:
			note = "beyond their spread across rounds"
		}
		why = append(why, fmt.Sprintf("under sync.Pool and map growth, which follow the GC's cadence, %s → %s, %s", num(gb), num(ga), note))
	}
	delta := 0.0
	switch { // the exact part first: an own growth fails, whatever the cadence did
	case ownMoved:
		delta = oa - ob
	case gcMoved:
		delta = ga - gb
	}
	// The change judged is the part that moved: when the rest (the
	// cadence's part within its spread) turns the figure's total the
	// other way, the change shown is the judged one, so that a growth
	// is never called an improvement, nor a fall a regression.
	if delta != 0 && c.Delta != 0 && (delta > 0) != (c.Delta > 0) {
		why = append(why, fmt.Sprintf("the figure's total moved %s, the GC's cadence within its spread: the change shown is the code's own", signedNum(c.Delta)))
		c.Delta = delta
		if c.Before != 0 {
			c.DeltaPct = 100 * delta / c.Before
		}
	}
	old := c.Verdict
	switch {
	case delta > 0:
		c.Verdict = "regression"
	case delta < 0:
		c.Verdict = "improvement"
	default:
		c.Verdict = "no change"
	}
	if what == "bytes asked for" && c.Verdict == "no change" && old != "no change" {
		why = append(why, "the size-class bytes moved: the tiny allocator's 16-byte blocks are charged to the site that opens them")
	}
	if len(why) > 0 {
		c.Why = strings.Join(why, "; ")
	}
	if pct, gated := cfg.Gate(c.Metric); gated {
		base := ob + gb
		grown := math.Inf(1)
		if base > 0 {
			grown = 100 * delta / base
		}
		c.Failed = c.Verdict == "regression" && (pct == 0 || grown > pct)
	}
}
