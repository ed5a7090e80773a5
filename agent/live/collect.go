package live

import (
	"maps"
	"slices"
	"time"

	"github.com/perfspy/perfspy/agent/internal/spytable"
	"github.com/perfspy/perfspy/agent/livepush"
	"github.com/perfspy/perfspy/agent/wire"
)

// collector reads the recorders and the route table period after period.
type collector struct {
	routes spytable.RoutePeriods
	lives  []*spytable.Live
	sample int
	last   time.Time
}

// next reads a period that ends now.
func (c *collector) next(now time.Time) (*livepush.Period, error) {
	names, routes := c.routes.Next()
	data := map[string]*livepush.RouteData{}
	get := func(r string) *livepush.RouteData {
		if r == "" {
			r = "background"
		}
		if data[r] == nil {
			data[r] = &livepush.RouteData{}
		}
		return data[r]
	}
	for _, r := range routes {
		if r.Requests > 0 || r.Sampled > 0 {
			d := get(r.Name)
			d.Requests, d.Sampled = r.Requests, r.Sampled
		}
	}
	pd := &livepush.Period{From: c.last, Until: now, Dropped: map[string]uint64{}}
	c.last = now
	kinds := map[string]bool{}
	for _, l := range c.lives {
		sites, dropped, err := l.Table.Period()
		if err != nil {
			return nil, err
		}
		kinds[l.Kind] = true
		if dropped > 0 {
			pd.Dropped[l.Kind] = dropped
		}
		switch rep := l.Report(sites, dropped, names).(type) {
		case *wire.AllocReport:
			for _, s := range rep.Sites {
				get(s.Route).Allocs = append(get(s.Route).Allocs, s)
			}
		case *wire.CopyReport:
			for _, s := range rep.Sites {
				get(s.Route).Copies = append(get(s.Route).Copies, s)
			}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(data)) {
		pd.Series = append(pd.Series, livepush.RouteSeries(pd, r, data[r], kinds, c.sample)...)
	}
	return pd, nil
}
