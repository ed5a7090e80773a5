package livepush

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/perfspy/perfspy/agent/wire"
)

// The store's names (__name__) of what a period pushes, as probe run -push
// names the same profiles (probe.StoreName), and the sample type that
// carries requests (profstore.RequestsType, on the frame RequestsFrame).
const (
	NameAllocs    = "memory"
	NameCopies    = "perfspy_copies"
	NameRequests  = "perfspy_requests" // every request of the route in the period
	NameDropped   = "perfspy_dropped"  // periods and sites lost, when any
	RequestsType  = "requests"
	RequestsFrame = "perfspy.requests"
	// RouteLabel is the series' label that names its route (profkey.RouteLabel).
	RouteLabel = "route"
	// The requests' own bills of a period (docs/bills.md): the slowest 1%
	// of the accounted requests that ended in it and as many around the
	// median, their allocations and copies summed, the group's requests
	// in the requests sample type.
	NameTailAllocs   = "perfspy_tail_allocs"
	NameMedianAllocs = "perfspy_median_allocs"
	NameTailCopies   = "perfspy_tail_copies"
	NameMedianCopies = "perfspy_median_copies"
)

// Series is one profile of a push, under its labels (beside the
// config's): its name and route.
type Series struct {
	name, route string
	profile     []byte
}

// Period is what one period pushes.
type Period struct {
	From, Until time.Time
	Series      []Series
	Dropped     map[string]uint64 // what the recorders' tables could not hold, by kind
}

// RouteData is one route's period: every request it served, those of
// them accounted, and the accounted requests' sites.
type RouteData struct {
	Requests, Sampled uint64
	Allocs            []wire.AllocSite
	Copies            []wire.CopySite
}

// RouteSeries are a route's profiles: its sampled requests' allocations
// and copies, with those requests in the requests sample type, and every
// request it served in the period.
func RouteSeries(pd *Period, route string, d *RouteData, kinds map[string]bool, sample int) []Series {
	var out []Series
	stamp := func(b *profileBuilder, reqs uint64) []byte {
		b.timeNanos, b.durationNanos = pd.From.UnixNano(), pd.Until.Sub(pd.From).Nanoseconds()
		b.addComment(fmt.Sprintf("perfspy.requests=%d", reqs))
		b.addComment(fmt.Sprintf("perfspy.sample=1/%d", sample))
		return b.encode()
	}
	if kinds["allocs"] {
		out = append(out, Series{NameAllocs, route, stamp(allocProfile(route, d.Allocs, d.Sampled), d.Sampled)})
	}
	if kinds["copies"] {
		out = append(out, Series{NameCopies, route, stamp(copyProfile(route, d.Copies, d.Sampled), d.Sampled)})
	}
	b := newProfile([][2]string{{RequestsType, "count"}}, [2]string{RequestsType, "count"}, RequestsType)
	b.add(b.frame(RequestsFrame), []int64{int64(d.Requests)})
	return append(out, Series{NameRequests, route, stamp(b, d.Requests)})
}

// allocProfile is allocspy.Profile's shape (its sample types, stacks and
// labels), with the requests sample type added as the store wants it.
func allocProfile(route string, sites []wire.AllocSite, sampled uint64) *profileBuilder {
	b := newProfile([][2]string{{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"heap_blocks", "count"}, {"requested_space", "bytes"}, {RequestsType, "count"}},
		[2]string{"space", "bytes"}, "alloc_space")
	for _, s := range sites {
		stack, via := wire.AllocStack(s.Stack)
		b.add(b.sampleStack(stack), []int64{int64(s.Objects), int64(s.AllocBytes), int64(s.Blocks), int64(s.ReqBytes), 0}, "via", via, RouteLabel, route)
	}
	b.add(b.frame(RequestsFrame), []int64{0, 0, 0, 0, int64(sampled)})
	return b
}

// copyBuckets names copyspy's size buckets (copyspy.Buckets).
var copyBuckets = [4]string{"<64", "<1K", "<16K", ">=16K"}

// copyProfile is copyspy.Profile's shape, with the requests sample type.
func copyProfile(route string, sites []wire.CopySite, sampled uint64) *profileBuilder {
	b := newProfile([][2]string{{"copy_calls", "count"}, {"copied_bytes", "bytes"}, {"clear_calls", "count"}, {"cleared_bytes", "bytes"}, {RequestsType, "count"}},
		[2]string{"copy", "count"}, "copied_bytes")
	b.addComment("perfspy.copies_profile=v2")
	for _, s := range sites {
		user, via := wire.UserStack(s.Stack)
		locs := b.sampleStack(user)
		for bk := range copyBuckets {
			if s.Calls[bk] == 0 {
				continue
			}
			v := []int64{int64(s.Calls[bk]), int64(s.Bytes[bk]), 0, 0, 0}
			if s.Kind == "memclr" {
				v = []int64{0, 0, int64(s.Calls[bk]), int64(s.Bytes[bk]), 0}
			}
			b.add(locs, v, "bucket", copyBuckets[bk], "kind", s.Kind, "via", via, RouteLabel, route)
		}
	}
	b.add(b.frame(RequestsFrame), []int64{0, 0, 0, 0, int64(sampled)})
	return b
}

// droppedProfile says what was lost since the last push that arrived:
// periods (the store failed, or the queue was full) and what the
// recorders' tables could not hold.
func droppedProfile(periods uint64, tables map[string]uint64, from, until time.Time) []byte {
	b := newProfile([][2]string{{"dropped", "count"}}, [2]string{"dropped", "count"}, "dropped")
	b.timeNanos, b.durationNanos = from.UnixNano(), until.Sub(from).Nanoseconds()
	if periods > 0 {
		b.add(b.frame("perfspy.dropped_periods"), []int64{int64(periods)})
	}
	for _, k := range slices.Sorted(maps.Keys(tables)) {
		b.add(b.frame("perfspy.dropped_"+k), []int64{int64(tables[k])})
	}
	return b.encode()
}

// BillGroup is one group of a period's bills: its requests, and their
// allocations (objects and bytes asked for) and copies by stack, summed.
type BillGroup struct {
	Requests uint64
	Allocs   []wire.AllocSite // Objects and ReqBytes
	Copies   []wire.CopySite  // calls and bytes in the first bucket: a bill keeps no sizes
}

// BillSeries are a period's bill profiles: the slowest 1%'s (tail) and
// the median group's, allocations and copies (the latter when copies is
// set), out of billed bills that ended in the period. Their sample types
// are the allocation and copy profiles', named with the group
// (tail_alloc_objects, median_copied_bytes, ...).
func BillSeries(pd *Period, tail, median *BillGroup, billed int, copies bool, sample int) []Series {
	var out []Series
	for _, g := range []struct {
		allocs, copies, prefix string
		g                      *BillGroup
	}{{NameTailAllocs, NameTailCopies, "tail_", tail}, {NameMedianAllocs, NameMedianCopies, "median_", median}} {
		// The sample types carry the group's name: a reader asking the
		// store for type=alloc_objects still finds one profile (memory).
		typ := func(t, unit string) [2]string { return [2]string{g.prefix + t, unit} }
		stamp := func(b *profileBuilder) []byte {
			b.timeNanos, b.durationNanos = pd.From.UnixNano(), pd.Until.Sub(pd.From).Nanoseconds()
			b.addComment(fmt.Sprintf("perfspy.requests=%d", g.g.Requests))
			b.addComment(fmt.Sprintf("perfspy.bills=%d", billed))
			b.addComment(fmt.Sprintf("perfspy.sample=1/%d", sample))
			return b.encode()
		}
		a := newProfile([][2]string{typ("alloc_objects", "count"), typ("requested_space", "bytes"), {RequestsType, "count"}}, [2]string{"space", "bytes"}, g.prefix+"requested_space")
		for _, s := range g.g.Allocs {
			stack, via := wire.AllocStack(s.Stack)
			a.add(a.sampleStack(stack), []int64{int64(s.Objects), int64(s.ReqBytes), 0}, "via", via)
		}
		a.add(a.frame(RequestsFrame), []int64{0, 0, int64(g.g.Requests)})
		out = append(out, Series{g.allocs, "", stamp(a)})
		if !copies {
			continue
		}
		c := newProfile([][2]string{typ("copy_calls", "count"), typ("copied_bytes", "bytes"), typ("clear_calls", "count"), typ("cleared_bytes", "bytes"), {RequestsType, "count"}},
			[2]string{"copy", "count"}, g.prefix+"copied_bytes")
		c.addComment("perfspy.copies_profile=v2")
		for _, s := range g.g.Copies {
			user, via := wire.UserStack(s.Stack)
			v := []int64{int64(s.Calls[0]), int64(s.Bytes[0]), 0, 0, 0}
			if s.Kind == "memclr" {
				v = []int64{0, 0, int64(s.Calls[0]), int64(s.Bytes[0]), 0}
			}
			c.add(c.sampleStack(user), v, "kind", s.Kind, "via", via)
		}
		c.add(c.frame(RequestsFrame), []int64{0, 0, 0, 0, int64(g.g.Requests)})
		out = append(out, Series{g.copies, "", stamp(c)})
	}
	return out
}
