package probe

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/stacks"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/offcpu"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// SourceOffCPU names the off-CPU figures' source in summary.json: the
// execution trace, with each request marked by the net/http overlay.
const SourceOffCPU = schema.SourceOffCPU

// topWaits is how many wait rows the tail groups and the background list.
const topWaits = 5

// NoRequestRegions is the off-CPU source's reason when the trace holds no
// request: only net/http's servers open a region per request; gRPC calls
// served by grpc-go are marked by route (allocations, copies) from their
// goroutine label, but their end is not, so they have none.
const NoRequestRegions = "no request boundaries in the trace (a region per request is opened by net/http's HTTP/1 and HTTP/2 servers; gRPC calls served by grpc-go are marked by route for allocations and copies, but their end is not, so they have no off-CPU region: docs/routes.md, Blind spots); background waits are in background_offcpu_us"

// setOffCPU puts the trace's figures into s: the mean request's split, the
// background per second, the median and slowest 1%, and the checks that
// the split closes on the requests' duration and sits below the driver's
// latency.
func setOffCPU(s *schema.Summary, res *offcpu.Result, l *load.Result) {
	us := func(ns float64) float64 { return round(ns/1e3, 3) }
	if secs := float64(res.Span) / 1e9; secs > 0 {
		s.BackgroundOffCPUUS = map[string]float64{}
		for _, r := range schema.OffCPUReasons {
			s.BackgroundOffCPUUS[r] = round(float64(res.Background[r])/1e3/secs, 3)
		}
		for _, t := range offcpu.BackgroundTop(res, topWaits) {
			s.BackgroundTop = append(s.BackgroundTop, schema.WaitRow{Reason: t.Reason, Wait: t.Wait, Func: t.Func, WokenBy: t.WokenBy, US: round(t.Nanos/1e3/secs, 3)})
		}
	}
	if len(res.Requests) == 0 {
		s.Sources["offcpu"] = SourceNone + ": " + NoRequestRegions
		return
	}
	s.Sources["offcpu"] = SourceOffCPU
	group := func(g offcpu.Group) *schema.TailGroup {
		t := &schema.TailGroup{Requests: g.Requests, TotalUS: us(g.Total), PartsUS: map[string]float64{}, Remainder: us(g.Remainder), Top: []schema.WaitRow{}}
		for p, v := range g.Parts {
			t.PartsUS[p] = us(v)
		}
		for _, w := range g.Top {
			t.Top = append(t.Top, schema.WaitRow{Reason: w.Reason, Wait: w.Wait, Func: w.Func, WokenBy: w.WokenBy, US: us(w.Nanos)})
		}
		return t
	}
	all := group(offcpu.Mean(res, res.Requests, topWaits))
	s.PerRequest.RequestUS = maps.Clone(all.PartsUS)
	s.PerRequest.RequestUS["total"] = all.TotalUS
	s.PerRequest.OffCPUUS = maps.Clone(all.PartsUS)
	delete(s.PerRequest.OffCPUUS, "cpu")
	setRouteOffCPU(s, res, us)
	p50, p99 := offcpu.Tail(res, topWaits)
	s.Tail = map[string]*schema.TailGroup{"p50": group(p50), "p99": group(p99)}
	s.Checks["offcpu_requests"] = float64(len(res.Requests))
	s.Checks["request_us_remainder"] = all.Remainder
	if l != nil && l.Latency != nil && l.Latency.TotalCount() > 0 {
		mean := l.Latency.Mean() // µs
		s.Checks["driver_latency_mean_us"] = round(mean, 3)
		s.Checks["request_us_driver_gap"] = round(mean-all.TotalUS, 3)
	}
}

// windowSummary describes a window with its CPU per request.
func windowSummary(w *windowResult) *schema.AttributionSummary {
	l := w.load
	a := &schema.AttributionSummary{Seconds: round(l.Elapsed.Seconds(), 3), Requests: l.OK, Errors: l.Errors + l.Non2xx, RPS: round(l.RPS(), 1)}
	if l.OK > 0 {
		a.CPUUS = round(float64(w.cpu)/1e3/float64(l.OK), 3)
	}
	return a
}

// writeOffCPU turns the off-CPU window's trace, block and mutex files into
// per-request figures and profiles.
func (o *runOutput) writeOffCPU(w *windowResult) error {
	s, raw, comments := o.s, o.raw, o.comments(w)
	s.OffCPUWindow = windowSummary(w)
	if raw.trace != "" {
		f, err := os.Open(raw.trace)
		if err != nil {
			return err
		}
		res, err := offcpu.Parse(f, offcpu.Options{Exclude: instrumentPrefixes})
		f.Close()
		if err != nil {
			return fmt.Errorf("off-CPU: %w", err)
		}
		setOffCPU(s, res, w.load)
		// The requests' waits carry the requests comment, so that any tool
		// divides them by requests; the background's never do.
		if len(res.Requests) > 0 {
			p := res.Profile(offcpu.ScopeRequest)
			p.Comments = comments
			if err := o.addProfile("offcpu.pb.gz", p); err != nil {
				return err
			}
			s.Files["offcpu"] = "offcpu.pb.gz"
		}
		p := res.Profile(offcpu.ScopeBackground)
		p.Comments = slices.DeleteFunc(slices.Clone(comments), func(c string) bool { return strings.HasPrefix(c, profkey.RequestsComment) })
		if err := o.addProfile("offcpu_background.pb.gz", p); err != nil {
			return err
		}
		s.Files["offcpu_background"] = "offcpu_background.pb.gz"
	}
	for _, name := range []string{"block", "mutex"} {
		before, err := readProfile(raw.blocking + "." + name)
		if err != nil {
			return err
		}
		after, err := readProfile(raw.blocking + "." + name + ".end")
		if err != nil {
			return err
		}
		d, err := profileDelta(before, after)
		if err != nil {
			return fmt.Errorf("%s profile: %w", name, err)
		}
		d.Comments = comments
		if err := o.addProfile(name+".pb.gz", d); err != nil {
			return err
		}
		s.Files[name] = name + ".pb.gz"
	}
	return nil
}

// writeWallclock turns the wall-clock window's profile into
// wallclock.pb.gz, perfspy's own goroutines left out.
func (o *runOutput) writeWallclock(w *windowResult) error {
	p, err := readWallclock(o.raw.wallclock, o.raw.wallclockPprof)
	if err != nil {
		return fmt.Errorf("wall-clock profile: %w", err)
	}
	p = dropInstruments(p)
	p.Comments = o.comments(w)
	if err := o.addProfile("wallclock.pb.gz", p); err != nil {
		return err
	}
	o.s.WallclockWindow = windowSummary(w)
	o.s.Files["wallclock"] = "wallclock.pb.gz"
	return nil
}

// dropInstruments removes the samples whose stack passes through
// perfspy's instruments (fgprof samples its own goroutine too).
func dropInstruments(p *profile.Profile) *profile.Profile {
	kept := p.Sample[:0]
	for _, s := range p.Sample {
		if !throughInstruments(s) {
			kept = append(kept, s)
		}
	}
	p.Sample = kept
	return p.Compact()
}

// readWallclock reads the off-CPU window's wall-clock profile: the agent's
// report, made a pprof profile, or fgprof's own pprof file.
func readWallclock(path string, isPprof bool) (*profile.Profile, error) {
	if isPprof {
		return readProfile(path)
	}
	var rep wire.WallclockReport
	if err := wire.ReadJSON(path, &rep); err != nil {
		return nil, err
	}
	return WallclockProfile(&rep), nil
}

// WallclockProfile turns the agent's wall-clock report into a pprof
// profile with fgprof's sample types: samples/count and time/nanoseconds
// (each sample stands for one period of wall time of one goroutine).
func WallclockProfile(rep *wire.WallclockReport) *profile.Profile {
	period := int64(1e9)
	if rep.Hz > 0 {
		period /= int64(rep.Hz)
	}
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "time", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "wallclock", Unit: "nanoseconds"},
		Period:        period,
		DurationNanos: int64(rep.Seconds * 1e9),
	}
	b := stacks.NewBuilder(p)
	for _, s := range rep.Samples {
		p.Sample = append(p.Sample, &profile.Sample{
			Location: b.Locations(s.Stack),
			Value:    []int64{int64(s.Count), int64(s.Count) * period},
		})
	}
	return p
}

// setRouteOffCPU gives each route its requests' mean split, from the
// route each request logged in its region.
func setRouteOffCPU(s *schema.Summary, res *offcpu.Result, us func(float64) float64) {
	byRoute := map[string][]offcpu.Request{}
	for _, r := range res.Requests {
		byRoute[r.Route] = append(byRoute[r.Route], r)
	}
	for i := range s.Routes {
		rs := &s.Routes[i]
		reqs := byRoute[rs.Route]
		if len(reqs) == 0 {
			continue
		}
		g := offcpu.Mean(res, reqs, 0)
		rs.OffCPURequests = g.Requests
		rs.RequestUS = map[string]float64{"total": us(g.Total)}
		for p, v := range g.Parts {
			rs.RequestUS[p] = us(v)
		}
	}
}
