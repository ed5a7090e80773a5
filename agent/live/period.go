package live

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/perfspy/perfspy/agent/internal/spytable"
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
)

// series is one profile of a push, under its labels (beside the
// config's): its name and route.
type series struct {
	name, route string
	profile     []byte
}

// period is what one period pushes.
type period struct {
	from, until time.Time
	series      []series
	dropped     map[string]uint64 // what the recorders' tables could not hold
}

// collector reads the recorders and the route table period after period.
type collector struct {
	routes spytable.RoutePeriods
	lives  []*spytable.Live
	sample int
	last   time.Time
}

// routeData is one route's period: its requests, and its sites by kind.
type routeData struct {
	reqs, sampled uint64
	allocs        []wire.AllocSite
	copies        []wire.CopySite
}

// next reads a period that ends now.
func (c *collector) next(now time.Time) (*period, error) {
	names, routes := c.routes.Next()
	data := map[string]*routeData{}
	get := func(r string) *routeData {
		if r == "" {
			r = "background"
		}
		if data[r] == nil {
			data[r] = &routeData{}
		}
		return data[r]
	}
	for _, r := range routes {
		if r.Requests > 0 || r.Sampled > 0 {
			d := get(r.Name)
			d.reqs, d.sampled = r.Requests, r.Sampled
		}
	}
	pd := &period{from: c.last, until: now, dropped: map[string]uint64{}}
	c.last = now
	kinds := map[string]bool{}
	for _, l := range c.lives {
		sites, dropped, err := l.Table.Period()
		if err != nil {
			return nil, err
		}
		kinds[l.Kind] = true
		if dropped > 0 {
			pd.dropped[l.Kind] = dropped
		}
		switch rep := l.Report(sites, dropped, names).(type) {
		case *wire.AllocReport:
			for _, s := range rep.Sites {
				get(s.Route).allocs = append(get(s.Route).allocs, s)
			}
		case *wire.CopyReport:
			for _, s := range rep.Sites {
				get(s.Route).copies = append(get(s.Route).copies, s)
			}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(data)) {
		pd.series = append(pd.series, c.routeSeries(pd, r, data[r], kinds)...)
	}
	return pd, nil
}

// routeSeries are a route's profiles: its sampled requests' allocations
// and copies, with those requests in the requests sample type, and every
// request it served in the period.
func (c *collector) routeSeries(pd *period, route string, d *routeData, kinds map[string]bool) []series {
	var out []series
	stamp := func(b *profileBuilder, reqs uint64) []byte {
		b.timeNanos, b.durationNanos = pd.from.UnixNano(), pd.until.Sub(pd.from).Nanoseconds()
		b.addComment(fmt.Sprintf("perfspy.requests=%d", reqs))
		b.addComment(fmt.Sprintf("perfspy.sample=1/%d", c.sample))
		return b.encode()
	}
	if kinds["allocs"] {
		out = append(out, series{NameAllocs, route, stamp(allocProfile(route, d.allocs, d.sampled), d.sampled)})
	}
	if kinds["copies"] {
		out = append(out, series{NameCopies, route, stamp(copyProfile(route, d.copies, d.sampled), d.sampled)})
	}
	b := newProfile([][2]string{{RequestsType, "count"}}, [2]string{RequestsType, "count"}, RequestsType)
	b.add(b.frame(RequestsFrame), []int64{int64(d.reqs)})
	return append(out, series{NameRequests, route, stamp(b, d.reqs)})
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
