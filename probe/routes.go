package probe

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// RoutesOutput is summary.json's routes section: the routes most
// requested first, the background per second, the closure.
type RoutesOutput struct {
	Routes     []schema.RouteSummary `json:"routes"`
	Background schema.RouteSummary   `json:"background"` // totals, and per second (per_s)
	// BeforeRouting is the work HTTP/1 requests cause before their route
	// is known (reading and parsing them), per request of every route.
	BeforeRouting *schema.RouteSummary `json:"before_routing,omitempty"`
	// Unfollowed is the work done under the mark of a request that no
	// longer had it, per second, with its parts by route of origin.
	Unfollowed schema.RouteSummary  `json:"unfollowed"`
	Closure    schema.RoutesClosure `json:"closure"`
}

// routeFolds reads the routes report and returns, for each route whose
// requests all moved to another (the mux matched their pattern), that
// route: its samples are relabelled so a request's work is in one route.
func routeFolds(rep *wire.RouteReport) map[string]string {
	folds := map[string]string{}
	for _, r := range rep.Routes {
		if r.Into != "" && !r.IntoSeveral && r.Requests == 0 {
			folds[r.Name] = r.Into
		}
	}
	return folds
}

// foldRoutes relabels p's samples by folds.
func foldRoutes(p *profile.Profile, folds map[string]string) {
	for _, s := range p.Sample {
		if v := s.Label[profkey.RouteLabel]; len(v) == 1 {
			if into, ok := folds[v[0]]; ok {
				s.Label[profkey.RouteLabel] = []string{into}
			} else if origin, ok := profkey.UnfollowedOrigin(v[0]); ok && folds[origin] != "" {
				s.Label[profkey.RouteLabel] = []string{profkey.UnfollowedFrom + folds[origin]}
			}
		}
	}
}

// routeOf is a sample's route label, "" when it has none.
func routeOf(s *profile.Sample) string {
	if v := s.Label[profkey.RouteLabel]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// routeFigures splits the attribution window's allocations (alloc_objects,
// alloc_space at index 0, 1) and copies (copied_bytes at 1) by route.
func routeFigures(rep *wire.RouteReport, allocs, copies *profile.Profile, driverOK int64, seconds float64) *RoutesOutput {
	sp := newRouteSplit(rep)
	out := sp.out
	defer func() { out.Routes = slices.DeleteFunc(out.Routes, idle) }()
	var unlabelled [2]int64
	if allocs != nil {
		for _, s := range allocs.Sample {
			out.Closure.Allocs += s.Value[0]
			sp.allocBytes += s.Value[1]
			if !sp.addAlloc(s) {
				unlabelled[0] += s.Value[0]
			}
		}
	}
	if copies != nil {
		for _, s := range copies.Sample {
			out.Closure.CopiedBytes += s.Value[1]
			if o := sp.unfollowed(routeOf(s)); o != nil {
				o.CopiedBytes += s.Value[1]
				out.Unfollowed.CopiedBytes += s.Value[1]
			} else if rs := sp.byName[routeOf(s)]; rs != nil {
				rs.CopiedBytes += s.Value[1]
			} else {
				unlabelled[1] += s.Value[1]
			}
		}
	}
	out.Closure.AllocsRemainder, out.Closure.CopiedRemainder = unlabelled[0], unlabelled[1]
	out.Closure.DriverRequests, out.Closure.Seconds = driverOK, round(seconds, 3)
	if rep != nil {
		out.Closure.HandoffsLost, out.Closure.Orphaned = rep.HandLost, rep.Orphaned
	}
	all := ptrs(out.Routes)
	if out.BeforeRouting != nil {
		out.BeforeRouting.Requests = out.Closure.RouteRequests
		all = append(all, out.BeforeRouting)
	}
	sp.perSecond(&out.Background, profkey.Background, seconds)
	sp.perSecond(&out.Unfollowed, profkey.Unfollowed, seconds)
	sp.originFigures(seconds)
	for _, rs := range all {
		n := float64(rs.Requests)
		if rep.Sampled {
			n = float64(rs.SampledRequests)
		}
		sp.perRequest(rs, rs.Route, n)
	}
	sort.SliceStable(out.Routes, func(i, j int) bool {
		if out.Routes[i].Requests != out.Routes[j].Requests {
			return out.Routes[i].Requests > out.Routes[j].Requests
		}
		return out.Routes[i].Route < out.Routes[j].Route
	})
	return out
}

// routeSplit is routeFigures' state: the output, each label's summary,
// the sites' sums by label, and the unfollowed work's parts by route of
// origin ("" unknown).
type routeSplit struct {
	out        *RoutesOutput
	sampled    bool
	byName     map[string]*schema.RouteSummary
	siteSums   map[string]map[string][2]int64
	origins    map[string]*schema.RouteSummary
	allocBytes int64
}

// originSites keys an origin's sites in siteSums apart from the route's.
const originSites = "\x00origin "

func newRouteSplit(rep *wire.RouteReport) *routeSplit {
	out := &RoutesOutput{Background: schema.RouteSummary{Route: profkey.Background}, Unfollowed: schema.RouteSummary{Route: profkey.Unfollowed}}
	sp := &routeSplit{out: out, sampled: rep.Sampled, byName: map[string]*schema.RouteSummary{profkey.Background: &out.Background},
		siteSums: map[string]map[string][2]int64{}, origins: map[string]*schema.RouteSummary{}}
	folds := routeFolds(rep)
	for _, r := range rep.Routes {
		if _, folded := folds[r.Name]; folded {
			continue
		}
		if r.Name == profkey.BeforeRouting {
			out.BeforeRouting = &schema.RouteSummary{Route: r.Name}
			sp.byName[r.Name] = out.BeforeRouting
			continue
		}
		rs := &schema.RouteSummary{Route: r.Name, Requests: r.Requests, SampledRequests: r.SampledRequests}
		if r.IntoSeveral {
			rs.Note = "requests begun under this route ended under several routes: its work before the mux matched their pattern stays here"
		}
		out.Routes = append(out.Routes, *rs)
		if strings.HasPrefix(r.Name, profkey.SelfPrefix) {
			out.Closure.SelfRequests += r.Requests
		} else {
			out.Closure.RouteRequests += r.Requests
		}
	}
	for i := range out.Routes {
		sp.byName[out.Routes[i].Route] = &out.Routes[i]
	}
	return sp
}

// unfollowed is the origin's part of the unfollowed work when route is an
// unfollowed label, nil otherwise.
func (sp *routeSplit) unfollowed(route string) *schema.RouteSummary {
	origin, ok := profkey.UnfollowedOrigin(route)
	if !ok {
		return nil
	}
	if o := sp.origins[origin]; o != nil {
		return o
	}
	o := &schema.RouteSummary{Route: origin}
	if rs := sp.byName[origin]; rs != nil {
		o.Requests, o.SampledRequests = rs.Requests, rs.SampledRequests
	}
	sp.origins[origin] = o
	return o
}

// addAlloc adds an allocation sample to its label's figures and sites; it
// returns false for a sample of no known label.
func (sp *routeSplit) addAlloc(s *profile.Sample) bool {
	if o := sp.unfollowed(routeOf(s)); o != nil {
		o.Allocs += s.Value[0]
		o.AllocBytes += s.Value[1]
		sp.out.Unfollowed.Allocs += s.Value[0]
		sp.out.Unfollowed.AllocBytes += s.Value[1]
		sp.addSite(originSites+o.Route, s)
		sp.addSite(profkey.Unfollowed, s)
		return true
	}
	rs := sp.byName[routeOf(s)]
	if rs == nil {
		return false
	}
	rs.Allocs += s.Value[0]
	rs.AllocBytes += s.Value[1]
	sp.addSite(rs.Route, s)
	return true
}

func (sp *routeSplit) addSite(key string, s *profile.Sample) {
	m := sp.siteSums[key]
	if m == nil {
		m = map[string][2]int64{}
		sp.siteSums[key] = m
	}
	v := m[siteName(s)]
	m[siteName(s)] = [2]int64{v[0] + s.Value[0], v[1] + s.Value[1]}
}

// perSecond fills the figures of work on no request (the background, the
// unfollowed): per second of the window, and its share of the window's
// allocations and bytes.
func (sp *routeSplit) perSecond(rs *schema.RouteSummary, sites string, seconds float64) {
	if seconds > 0 {
		rs.AllocsPerSec = f64(round(float64(rs.Allocs)/seconds, 4))
		rs.AllocBytesPerSec = f64(round(float64(rs.AllocBytes)/seconds, 2))
		rs.CopiedBytesPerSec = f64(round(float64(rs.CopiedBytes)/seconds, 2))
		rs.Sites = routeSites(sp.siteSums[sites], seconds)
	}
	if all := sp.out.Closure.Allocs; all > 0 && sp.allocBytes > 0 {
		rs.ShareAllocs = f64(round(float64(rs.Allocs)/float64(all), 4))
		rs.ShareBytes = f64(round(float64(rs.AllocBytes)/float64(sp.allocBytes), 4))
	} else if rs.Route == profkey.Unfollowed {
		rs.ShareAllocs, rs.ShareBytes = f64(0), f64(0)
	}
}

// perRequest fills a route's figures per request (n of them).
func (sp *routeSplit) perRequest(rs *schema.RouteSummary, sites string, n float64) {
	if n > 0 {
		rs.AllocsPerReq = f64(round(float64(rs.Allocs)/n, 4))
		rs.AllocBytesPerReq = f64(round(float64(rs.AllocBytes)/n, 2))
		rs.CopiedBytesPerReq = f64(round(float64(rs.CopiedBytes)/n, 2))
		rs.Sites = routeSites(sp.siteSums[sites], n)
	}
}

// originFigures lists the unfollowed work's parts by route of origin,
// the heaviest first: each per request of its route, the unknown origin's
// per second.
func (sp *routeSplit) originFigures(seconds float64) {
	u := &sp.out.Unfollowed
	for _, o := range sp.origins {
		n := float64(o.Requests)
		if sp.sampled {
			n = float64(o.SampledRequests)
		}
		if n > 0 {
			sp.perRequest(o, originSites+o.Route, n)
		} else if seconds > 0 {
			o.AllocsPerSec = f64(round(float64(o.Allocs)/seconds, 4))
			o.AllocBytesPerSec = f64(round(float64(o.AllocBytes)/seconds, 2))
			o.CopiedBytesPerSec = f64(round(float64(o.CopiedBytes)/seconds, 2))
			o.Sites = routeSites(sp.siteSums[originSites+o.Route], seconds)
		}
		u.Origins = append(u.Origins, *o)
	}
	sort.Slice(u.Origins, func(i, j int) bool {
		if u.Origins[i].AllocBytes != u.Origins[j].AllocBytes {
			return u.Origins[i].AllocBytes > u.Origins[j].AllocBytes
		}
		return u.Origins[i].Route < u.Origins[j].Route
	})
}

func ptrs(rs []schema.RouteSummary) []*schema.RouteSummary {
	out := make([]*schema.RouteSummary, len(rs))
	for i := range rs {
		out[i] = &rs[i]
	}
	return out
}

// routeSites lists a route's sites, most allocations first, per n.
func routeSites(m map[string][2]int64, n float64) []schema.RouteSite {
	out := make([]schema.RouteSite, 0, len(m))
	for f, v := range m {
		out = append(out, schema.RouteSite{Func: f, Allocs: round(float64(v[0])/n, 4), Bytes: round(float64(v[1])/n, 2)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Allocs != out[j].Allocs {
			return out[i].Allocs > out[j].Allocs
		}
		return out[i].Func < out[j].Func
	})
	return out
}

// readRoutes reads the attribution window's routes report, once.
func (o *runOutput) readRoutes() error {
	if o.raw.routes == "" || o.routeRep != nil {
		return nil
	}
	var rep wire.RouteReport
	if err := wire.ReadJSON(o.raw.routes, &rep); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	o.routeRep = &rep
	return nil
}

// routeLabels labels a profile of the attribution window (labelRoutes).
func (o *runOutput) routeLabels(p *profile.Profile) { labelRoutes(p, o.routeRep) }

// labelRoutes folds a profile's route labels (routeFolds) and adds the
// routes' request counts to its comments: those of the routes that ended
// requests in the window. rep nil leaves p as it is.
func labelRoutes(p *profile.Profile, rep *wire.RouteReport) {
	if rep == nil {
		return
	}
	folds := routeFolds(rep)
	foldRoutes(p, folds)
	for _, r := range rep.Routes {
		if _, folded := folds[r.Name]; !folded && r.Requests > 0 {
			p.Comments = append(p.Comments, profkey.RouteRequestsComment+strconv.FormatUint(r.Requests, 10)+" "+r.Name)
		}
	}
}

// routes is the step that splits the attribution window by route.
func (o *runOutput) routes() error {
	if o.routeRep == nil || len(o.routeRep.Routes) == 0 || o.allocsProf == nil && o.copiesProf == nil {
		return nil
	}
	attr := o.win.attr
	r := routeFigures(o.routeRep, o.allocsProf, o.copiesProf, attr.load.OK, attr.load.Elapsed.Seconds())
	o.s.Routes, o.s.RoutesBackground, o.s.RoutesBeforeRouting, o.s.RoutesClosure = r.Routes, &r.Background, r.BeforeRouting, &r.Closure
	o.s.RoutesUnfollowed = &r.Unfollowed
	o.s.Sources["routes"] = SourceRoutes
	if o.routeRep.Sampled {
		o.sampledOnly()
		return nil
	}
	c := &schema.RequestsClosure{Marked: int64(r.Closure.RouteRequests), Driver: r.Closure.DriverRequests, Self: int64(r.Closure.SelfRequests)}
	c.Missed = c.Driver - c.Marked
	c.Closed = c.Missed == 0
	if o.s.Closure == nil {
		o.s.Closure = &schema.Closure{}
	}
	o.s.Closure.Requests = c
	switch l := attr.load; {
	case c.Closed:
	case l.Abandoned+l.Errors+l.Non2xx > 0:
		// The server marked requests the driver did not count a success
		// (abandoned at the window's end, failed): not its boundaries.
		return o.addReason(fmt.Sprintf("requests do not close: the driver counted %d successes in the attribution window, the request marks %d, beside %d requests abandoned and %d failed there", c.Driver, c.Marked, l.Abandoned, l.Errors+l.Non2xx))
	default:
		return o.addReason(o.unclosedRequests(c))
	}
	return nil
}

// sampledOnly leaves out the window's figures per request when only
// sampled requests' work was counted (-sample): they are per route only.
func (o *runOutput) sampledOnly() {
	s, pr := o.s, &o.s.PerRequest
	note := fmt.Sprintf(" (sampled: one request in %d of each route; per request only by route, routes[])", o.ses.cfg.Sample)
	for _, k := range []string{"allocs", "copies"} {
		if s.Sources[k] != "" {
			s.Sources[k] += note
		}
	}
	s.Sources["routes"] += note
	pr.Allocs, pr.AllocBytes, pr.AllocBlocks, pr.AllocRequestedBytes = nil, nil, nil, nil
	pr.CopyCalls, pr.CopiedBytes, pr.ClearCalls, pr.ClearedBytes = nil, nil, nil, nil
	o.rep.Sites, o.rep.CopySites, o.rep.Totals, o.rep.CopyRequests = nil, nil, nil, 0
}

// idle is a route with nothing in the window: named before it (a
// readiness check), no request, no work.
func idle(r schema.RouteSummary) bool {
	return r.Requests == 0 && r.Allocs == 0 && r.CopiedBytes == 0
}

// unclosedRequests says why the request marks do not close on the
// driver's successes with no request failed or abandoned: fewer marks are
// a path net/http's boundaries miss; more are requests that did not come
// from the driver (another client beside it, or the process's own
// requests on a platform where they are not told: SelfPrefix).
func (o *runOutput) unclosedRequests(c *schema.RequestsClosure) string {
	head := fmt.Sprintf("requests do not close: the driver counted %d successes in the attribution window, the request marks %d", c.Driver, c.Marked)
	if c.Self > 0 {
		head += fmt.Sprintf(" beside %d the process sent itself", c.Self)
	}
	if c.Missed < 0 {
		return fmt.Sprintf("%s (%d more): the target served requests the driver did not send (another client of its port, or its own requests where they are not told apart: docs/routes.md, \"The process's requests to itself\")", head, -c.Missed)
	}
	return fmt.Sprintf("%s (%d missed): the request boundaries of %s's net/http miss a path", head, c.Missed, o.ses.tgt.GoVersion)
}
