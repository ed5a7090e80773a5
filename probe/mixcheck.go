package probe

import (
	"fmt"
	"math"

	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// Beyond noise, for the mix check: a route's allocations per request in
// the mix and alone differ by more than mixCheckAllocs and by more than
// mixCheckShare of the larger, or its bytes by more than mixCheckBytes and
// that share. Exact counts of a deterministic handler agree to the
// hundredth; a handler that pays once in a while (a pool that refills, a
// cache that misses) moves by a few per cent.
const (
	mixCheckAllocs = 0.5
	mixCheckBytes  = 64
	mixCheckShare  = 0.05
)

// mixCheck compares each route's figures in the mix with its endpoint's
// alone (-alone): a route that differs beyond noise is named in
// summary.json (routes_mix_check), on the terminal and in report.md, with
// what the mix left unfollowed from it.
func (o *runOutput) mixCheck() error {
	s := o.s
	if len(s.Routes) == 0 || len(s.Endpoints) == 0 {
		return nil
	}
	unf := map[string]*schema.RouteSummary{}
	if u := s.RoutesUnfollowed; u != nil {
		for i := range u.Origins {
			unf[u.Origins[i].Route] = &u.Origins[i]
		}
	}
	checks := []schema.RouteMixCheck{}
	for _, e := range s.Endpoints {
		if e.Route == "" || e.RouteAllocs == nil || e.RouteAllocBytes == nil {
			continue
		}
		for _, r := range s.Routes {
			if r.Route != e.Route || r.AllocsPerReq == nil || r.AllocBytesPerReq == nil {
				continue
			}
			c, ok := mixDiffers(r, e, unf[r.Route])
			if ok {
				checks = append(checks, c)
			}
		}
	}
	s.RoutesMixCheck = checks
	return nil
}

// mixDiffers compares route r in the mix with endpoint e alone.
func mixDiffers(r schema.RouteSummary, e schema.EndpointSummary, unf *schema.RouteSummary) (schema.RouteMixCheck, bool) {
	mixA, aloneA := *r.AllocsPerReq, *e.RouteAllocs
	mixB, aloneB := *r.AllocBytesPerReq, *e.RouteAllocBytes
	differs := func(a, b, abs float64) bool {
		d := math.Abs(a - b)
		return d > abs && d > mixCheckShare*math.Max(math.Abs(a), math.Abs(b))
	}
	if !differs(mixA, aloneA, mixCheckAllocs) && !differs(mixB, aloneB, mixCheckBytes) {
		return schema.RouteMixCheck{}, false
	}
	c := schema.RouteMixCheck{Route: r.Route, Endpoint: e.Name, MixAllocs: mixA, AloneAllocs: aloneA, MixAllocBytes: mixB, AloneAllocBytes: aloneB}
	if unf != nil && unf.AllocsPerReq != nil {
		c.UnfollowedAllocs = *unf.AllocsPerReq
	}
	switch {
	case c.UnfollowedAllocs > 0:
		c.Note = fmt.Sprintf("the mix left %.2f allocations a request of its work unfollowed (%s): work it hands over that no channel or Cond carries", c.UnfollowedAllocs, profkey.UnfollowedFrom+r.Route)
	case mixA < aloneA:
		c.Note = "less in the mix: its work went elsewhere (another route, the background), or it shares what it pays for with the other routes (a pool, a cache)"
	default:
		c.Note = "more in the mix: it carries work that is not its own (handed over a queue perfspy cannot follow), or pays for what the other routes leave (a pool, a cache)"
	}
	return c, true
}
