package probe

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
	"github.com/perfspy/perfspy/syscalls"
)

// endpointWindow is one request of a mix measured alone.
type endpointWindow struct {
	req            load.Request
	timing, attr   *windowResult
	allocs, copies string // the attribution window's reports, "" when not counted
	routes         string // its requests per route, "" without request marks
}

// endpointWindows measures each request of a request file alone, after
// the mix's windows: the driver sends that request only.
func (s *session) endpointWindows(ctx context.Context) ([]endpointWindow, error) {
	if len(s.cfg.Mix) < 2 || !s.cfg.Alone {
		return nil, nil
	}
	mixDrv := s.drv
	defer func() { s.drv = mixDrv }()
	var out []endpointWindow
	for k, e := range s.cfg.Mix {
		c := s.cfg
		c.Mix = []load.Request{e}
		d, err := c.Spec.New(load.Endpoint(s.addr))
		if err != nil {
			return nil, err
		}
		s.drv = d
		ew, err := s.endpointWindow(ctx, k, e)
		d.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, ew)
	}
	return out, nil
}

// endpointWindow is request k's two windows: timing, then attribution
// with the runtime spies that the target has.
func (s *session) endpointWindow(ctx context.Context, k int, e load.Request) (endpointWindow, error) {
	ew := endpointWindow{req: e}
	var err error
	if ew.timing, err = s.window(ctx, windowSpec{kind: timingKind, endpoint: e.Name()}, wire.Request{Cmd: "begin"}); err != nil {
		return ew, err
	}
	var raw rawFiles
	full, _ := s.attributionRequest(&raw, ew.timing.load.RPS())
	req := wire.Request{Cmd: "begin", Counters: map[string]string{}}
	for name := range full.Counters {
		if name == "bills" {
			continue // the run's window has them; an endpoint's has one request
		}
		path := filepath.Join(s.priv, "endpoint-"+strconv.Itoa(k)+"-"+name+".json")
		req.Counters[name] = path
		switch name {
		case "allocs":
			ew.allocs = path
		case "copies":
			ew.copies = path
		case "routes":
			ew.routes = path
		}
	}
	if len(req.Counters) == 0 {
		return ew, nil // no runtime spies: the timing window's figures only
	}
	ew.attr, err = s.window(ctx, windowSpec{kind: attributionKind, endpoint: e.Name()}, req)
	return ew, err
}

// endpoints gives the summary each request's own figures, and the mix.
func (o *runOutput) endpoints() error {
	cfg := o.ses.cfg
	if len(cfg.Mix) == 0 {
		return nil
	}
	m := &schema.MixSummary{File: cfg.RequestFile, Order: load.Interleave(cfg.Mix)}
	for _, r := range cfg.Mix {
		m.Requests, m.Weights = append(m.Requests, r.Name()), append(m.Weights, r.Weight)
	}
	o.s.Mix = m
	bgs := make([]background, len(o.win.endpoints))
	for k, ew := range o.win.endpoints {
		es, err := o.endpointFigures(k, ew, &bgs[k])
		if err != nil {
			return err
		}
		o.s.Endpoints = append(o.s.Endpoints, es)
	}
	handedOff(o.s.Endpoints, bgs)
	return nil
}

// SourceHandedOff is the source of an endpoint's background_bytes and
// background_share: an estimate, per request of its attribution window.
const SourceHandedOff = "allocspy route labels: its attribution window's bytes outside any request, less the quietest request's window's background rate (an estimate; with one request alone, 0)"

// background is what an endpoint's attribution window allocated outside
// any request, and in all.
type background struct {
	bytes, total, seconds float64
	requests              int64
}

// handedOff sets each endpoint's bytes allocated outside its requests
// beyond the quietest window's background rate, per request, and their
// share of its window's bytes.
func handedOff(es []schema.EndpointSummary, bgs []background) {
	floor := math.Inf(1)
	for _, b := range bgs {
		if b.seconds > 0 && b.requests > 0 {
			floor = min(floor, b.bytes/b.seconds)
		}
	}
	for k, b := range bgs {
		if b.seconds == 0 || b.requests == 0 || b.total == 0 || math.IsInf(floor, 1) {
			continue
		}
		extra := max(0, b.bytes-floor*b.seconds)
		es[k].BackgroundBytes = f64(round(extra/float64(b.requests), 2))
		es[k].BackgroundShare = f64(round(extra/b.total, 3))
		es[k].Sources["background"] = SourceHandedOff
	}
}

// endpointFigures divides request k's windows by their successes and
// keeps its attribution window's profiles.
func (o *runOutput) endpointFigures(k int, ew endpointWindow, bg *background) (schema.EndpointSummary, error) {
	es := schema.EndpointSummary{Name: ew.req.Name(), Weight: ew.req.Weight, Requests: ew.timing.load.OK,
		Sources: map[string]string{"cpu": ew.timing.cpuSource, "syscalls": SourceNone, "allocs": SourceNone, "copies": SourceNone}}
	if n := float64(ew.timing.load.OK); n > 0 {
		es.CPUUS = f64(round(float64(ew.timing.cpu)/1e3/n, 3))
		if ew.timing.sys != nil {
			es.Sources["syscalls"] = syscalls.Source
			var total uint64
			for _, c := range ew.timing.sys {
				total += c
			}
			es.Syscalls = f64(round(float64(total)/n, 4))
		}
	}
	if ew.attr == nil || ew.attr.load.OK == 0 {
		return es, nil
	}
	n := float64(ew.attr.load.OK)
	es.AttributionRequests = ew.attr.load.OK
	var routes *wire.RouteReport
	if ew.routes != "" {
		routes = &wire.RouteReport{}
		if err := wire.ReadJSON(ew.routes, routes); err != nil {
			return es, fmt.Errorf("routes: %w", err)
		}
	}
	if ew.allocs != "" {
		es.Sources["allocs"] = SourceAllocspy
		rep, err := allocspy.ReadReport(ew.allocs)
		if err != nil {
			return es, err
		}
		objects, space, _, _ := allocspy.Totals(rep)
		es.Allocs, es.AllocBytes = f64(round(float64(objects)/n, 4)), f64(round(float64(space)/n, 2))
		p := allocspy.Profile(rep)
		labelRoutes(p, routes)
		routeOwn(&es, p, routes)
		if routes != nil {
			*bg = background{total: float64(space), seconds: ew.attr.load.Elapsed.Seconds(), requests: ew.attr.load.OK}
			for _, smp := range p.Sample {
				if v := smp.Label[profkey.RouteLabel]; len(v) == 1 && v[0] == profkey.Background {
					bg.bytes += float64(smp.Value[1])
				}
			}
		}
		if err := o.endpointProfile(&es, k, "allocs", p, ew.attr); err != nil {
			return es, err
		}
	}
	if ew.copies != "" {
		es.Sources["copies"] = SourceCopiesOverlay
		rep, err := copyspy.ReadReport(ew.copies)
		if err != nil {
			return es, err
		}
		var moved int64
		for _, st := range copyspy.Sites(rep) {
			if st.Kind == "memmove" {
				moved += st.TotalBytes()
			}
		}
		es.CopiedBytes = f64(round(float64(moved)/n, 2))
		p := copyspy.Profile(rep)
		labelRoutes(p, routes)
		if err := o.endpointProfile(&es, k, "copies", p, ew.attr); err != nil {
			return es, err
		}
	}
	return es, nil
}

// routeOwn sets the endpoint's route (the one most of its requests ended
// under, folds applied) and that route's own allocations per request in
// its window (labels of that route only).
func routeOwn(es *schema.EndpointSummary, p *profile.Profile, routes *wire.RouteReport) {
	if routes == nil {
		return
	}
	folds := routeFolds(routes)
	var best wire.RouteCount
	for _, r := range routes.Routes {
		if _, folded := folds[r.Name]; !folded && r.Name != profkey.BeforeRouting && r.Requests > best.Requests {
			best = r
		}
	}
	n := float64(best.Requests)
	if routes.Sampled {
		n = float64(best.SampledRequests)
	}
	if n == 0 {
		return
	}
	var objs, bytes int64
	for _, s := range p.Sample {
		if routeOf(s) == best.Name {
			objs += s.Value[0]
			bytes += s.Value[1]
		}
	}
	es.Route = best.Name
	es.RouteAllocs, es.RouteAllocBytes = f64(round(float64(objs)/n, 4)), f64(round(float64(bytes)/n, 2))
}

// endpointProfile adds request k's profile name, with its window's
// comments (its own request count).
func (o *runOutput) endpointProfile(es *schema.EndpointSummary, k int, name string, p *profile.Profile, w *windowResult) error {
	p.Comments = append(o.comments(w), p.Comments...)
	file := fmt.Sprintf("endpoint-%d-%s.pb.gz", k+1, name)
	if err := o.addProfile(file, p); err != nil {
		return err
	}
	if es.Files == nil {
		es.Files = map[string]string{}
	}
	es.Files[name] = file
	return nil
}
