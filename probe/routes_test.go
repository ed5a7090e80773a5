package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/testtarget"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// routeCount sums a profile's values vi of the samples labelled route whose
// leaf is fn (not the runtime's allocations a GC assist made under fn:
// allocspy.NestedAlloc); fn "" takes every sample.
func routeCount(p *profile.Profile, route, fn string, vi int) int64 {
	var n int64
	for _, s := range p.Sample {
		if routeOf(s) == route && (fn == "" || leafName(s) == fn) {
			n += s.Value[vi]
		}
	}
	return n
}

// routeRequests reads a profile's per-route request comments.
func routeRequests(t *testing.T, p *profile.Profile) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, c := range p.Comments {
		if v, ok := strings.CutPrefix(c, profkey.RouteRequestsComment); ok {
			n, route, _ := strings.Cut(v, " ")
			k, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("comment %q: %v", c, err)
			}
			out[route] = k
		}
	}
	return out
}

// TestRoutesMix: probetarget's three routes of known cost served
// concurrently in one window (weights 2:1:1), one of them handing work to
// a goroutine it starts, beside a ticker allocating in the background.
// Each route's sites are exact per request of the route, the child's work
// is charged to its route, the ticker's to the background only, the
// routes and the background add up to the window, and each deterministic
// route's figures equal those of its own window (-alone).
func TestRoutesMix(t *testing.T) {
	skipShort(t)
	file := filepath.Join(t.TempDir(), "mix.txt")
	os.WriteFile(file, []byte("GET /users/42 weight=2\nGET /child\nGET /alloc\n"), 0o644)
	checkRoutesMix(t, runTarget(t, "/", "-requests", file, "-alone", "-offcpu=false", "-args", "-ticker 2ms"))
}

// TestRoutesHTTP2: over HTTP/2 (h2c), each stream is marked on its own
// goroutine and the connection's frames are read in the background:
// /child's work, its goroutine's included, is its route's, exactly.
func TestRoutesHTTP2(t *testing.T) {
	skipShort(t)
	m := runTarget(t, "/child", "-proto", "h2c", "-offcpu=false", "-args", "-ticker 2ms")
	s, copies := summaryAndCopies(t, m)
	const child = "GET /child"
	if len(s.Routes) != 1 || s.Routes[0].Route != child || s.RoutesClosure == nil || s.Driver == nil || s.Driver.Name != "h2c" {
		t.Fatalf("routes %+v, driver %+v; want %s over h2c", s.Routes, s.Driver, child)
	}
	n, c := int64(s.Routes[0].Requests), s.RoutesClosure
	t.Logf("%s over h2c: %d requests, %v allocs/req; closure %+v", child, n, *s.Routes[0].AllocsPerReq, *c)
	if n != c.DriverRequests || c.AllocsRemainder != 0 || s.RoutesBeforeRouting != nil {
		t.Errorf("closure %+v, before routing %+v: want the driver's requests, no remainder, nothing before routing", *c, s.RoutesBeforeRouting)
	}
	if o := routeCount(m.allocs, child, "main.childWork", 0); o != 4*n {
		t.Errorf("main.childWork: %d allocations in %d requests, want 4 per request", o, n)
	}
	if b := routeCount(copies, child, "main.copyN", 1); b != 3000*n {
		t.Errorf("main.copyN: %d B in %d requests, want 3000 per request", b, n)
	}
	if routeCount(m.allocs, profkey.Background, "main.tickAlloc", 0) == 0 || routeCount(m.allocs, child, "main.tickAlloc", 0) != 0 {
		t.Error("the ticker's allocations are not the background's alone")
	}
}

// checkRoutesMix checks a run of TestRoutesMix's mix: each route's sites
// exact, the child's work its route's, the ticker's the background's, the
// closure, and each route alone (-alone) as in the mix.
func checkRoutesMix(t *testing.T, m *measured) {
	t.Helper()
	s, copies := summaryAndCopies(t, m)
	const users, child, alloc = "GET /users/{id}", "GET /child", "GET /alloc"
	reqs := map[string]int64{}
	for _, r := range s.Routes {
		reqs[r.Route] = int64(r.Requests)
	}
	t.Logf("routes %v, closure %+v", reqs, *s.RoutesClosure)
	if len(s.Routes) != 3 || reqs[users] == 0 || reqs[child] == 0 || reqs[alloc] == 0 {
		t.Fatalf("routes %v; want %s, %s and %s", reqs, users, child, alloc)
	}
	if got := routeRequests(t, m.allocs); got[users] != reqs[users] || got[child] != reqs[child] {
		t.Errorf("allocs.pb.gz route comments %v, summary %v", got, reqs)
	}
	// Weights 2:1:1, sent in a fixed order by -conns workers.
	if d := reqs[users] - 2*reqs[child]; d < -8 || d > 8 {
		t.Errorf("requests %v: not 2:1:1", reqs)
	}
	c := s.RoutesClosure
	if c.RouteRequests != uint64(c.DriverRequests) || c.AllocsRemainder != 0 || c.CopiedRemainder != 0 {
		t.Errorf("closure %+v: the routes' requests must be the driver's, with no remainder", *c)
	}
	if s.RoutesBeforeRouting == nil || s.RoutesBeforeRouting.Requests != c.RouteRequests || s.RoutesBeforeRouting.Allocs == 0 {
		t.Fatalf("before routing %+v: want the requests of every route and net/http's reading", s.RoutesBeforeRouting)
	}
	sum := s.RoutesBackground.Allocs + s.RoutesBeforeRouting.Allocs
	for _, r := range s.Routes {
		sum += r.Allocs
	}
	if total := totals(m.allocs)[0]; sum != total || total != c.Allocs {
		t.Errorf("Σ routes + background = %d allocations, the profile %d, the closure %d", sum, total, c.Allocs)
	}
	exact := []struct {
		route, fn   string
		objs, bytes int64 // per request of the route
	}{
		{users, "main.userAlloc", 3, 3 * 48},
		{child, "main.childWork", 4, 4 * 64},
		{alloc, "main.allocK7", 7, 7 * 64},
	}
	for _, e := range exact {
		n := reqs[e.route]
		if o, b := routeCount(m.allocs, e.route, e.fn, 0), routeCount(m.allocs, e.route, e.fn, 1); o != e.objs*n || b != e.bytes*n {
			t.Errorf("%s: %s %d objects %d B in %d requests; want %d and %d per request", e.route, e.fn, o, b, n, e.objs, e.bytes)
		}
		for _, other := range []string{users, child, alloc, profkey.Background, profkey.BeforeRouting} {
			if other != e.route && routeCount(m.allocs, other, e.fn, 0) != 0 {
				t.Errorf("%s allocated under %s", e.fn, other)
			}
		}
	}
	if b := routeCount(copies, child, "main.copyN", 1); b != 3000*reqs[child] {
		t.Errorf("%s: main.copyN copied %d B in %d requests, want 3000 per request", child, b, reqs[child])
	}
	if tick := routeCount(m.allocs, profkey.Background, "main.tickAlloc", 0); tick == 0 {
		t.Error("the ticker's allocations are not in the background")
	}
	for _, r := range []string{users, child, alloc, profkey.BeforeRouting} {
		if n := routeCount(m.allocs, r, "main.tickAlloc", 0); n != 0 {
			t.Errorf("the ticker's allocations charged to %s: %d", r, n)
		}
	}
	// The mix check finds nothing to name: every route costs in the mix
	// what it costs alone.
	if len(s.RoutesMixCheck) != 0 {
		t.Errorf("routes_mix_check %+v: want none", s.RoutesMixCheck)
	}
	// Alone, each route's own figures are the mix's.
	for _, e := range s.Endpoints {
		if e.Route == "" || e.RouteAllocs == nil {
			t.Errorf("endpoint %s: no route or route_allocs (%q)", e.Name, e.Route)
		}
		p, err := readProfile(filepath.Join(m.dir, e.Files["allocs"]))
		if err != nil {
			t.Fatal(err)
		}
		var route string
		for r := range routeRequests(t, p) {
			route = r
		}
		// sync.Pool refills its caches after each GC, and a GC assist
		// may allocate (runtime leaves): how often depends on the GC's
		// timing, not on the route, so those are left out. So is the
		// line of /child's go statement: besides its closure (one a
		// request), it allocates the new goroutine's g when no dead one
		// can be reused, which follows the peak of goroutines alive.
		own := func(p *profile.Profile, n int64) float64 {
			var objs int64
			for _, smp := range p.Sample {
				if routeOf(smp) == route && !strings.HasPrefix(siteName(smp), "sync.") && !strings.HasPrefix(leafName(smp), "runtime.") && !atGoLine(smp) {
					objs += smp.Value[0]
				}
			}
			return float64(objs) / float64(n)
		}
		alone, mixed := own(p, routeRequests(t, p)[route]), own(m.allocs, reqs[route])
		t.Logf("%s: route %s, %.4f allocs/req alone, %.4f in the mix (sync.Pool's sites aside)", e.Name, route, alone, mixed)
		if alone != mixed {
			t.Errorf("%s: %.4f allocs/req alone, %.4f in the mix", route, alone, mixed)
		}
	}
}

// TestRoutesOffCPU: in the off-CPU window each request's region names its
// route, so /sleep?ms=3's route waits its 3 ms and /none's does not.
func TestRoutesOffCPU(t *testing.T) {
	skipShort(t)
	file := filepath.Join(t.TempDir(), "mix.txt")
	os.WriteFile(file, []byte("GET /sleep?ms=3\nGET /none weight=3\n"), 0o644)
	m := runTarget(t, "/", "-requests", file)
	var s schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(m.dir, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	got := map[string]schema.RouteSummary{}
	for _, r := range s.Routes {
		got[r.Route] = r
	}
	sleep, none := got["GET /sleep"], got["GET /none"]
	t.Logf("GET /sleep: %d requests in the trace, %v µs; GET /none: %d, %v µs", sleep.OffCPURequests, sleep.RequestUS, none.OffCPURequests, none.RequestUS)
	if sleep.OffCPURequests == 0 || none.OffCPURequests == 0 || sleep.OffCPURequests+none.OffCPURequests != int(s.Checks["offcpu_requests"]) {
		t.Fatalf("routes' requests in the trace: %d + %d, the trace %v", sleep.OffCPURequests, none.OffCPURequests, s.Checks["offcpu_requests"])
	}
	if sleep.RequestUS["total"] < 3000 || sleep.RequestUS["total"]-sleep.RequestUS["cpu"] < 2900 || none.RequestUS["total"] > 1000 {
		t.Errorf("GET /sleep %v µs, want 3 ms of waiting; GET /none %v µs, want well under 1 ms", sleep.RequestUS, none.RequestUS)
	}
}

// TestABRoutes: probe ab reads a run's routes as metrics of their own
// ("GET /a allocs/req") with each route's profiles written beside the
// run's, one route's samples and requests in each.
func TestABRoutes(t *testing.T) {
	dir := t.TempDir()
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}},
		Comments: []string{profkey.RequestsComment + "40", profkey.RouteRequestsComment + "30 GET /a", profkey.RouteRequestsComment + "10 GET /b"}}
	for i, s := range []struct{ fn, route string }{{"main.a", "GET /a"}, {"main.b", "GET /b"}} {
		fn := &profile.Function{ID: uint64(i + 1), Name: s.fn}
		loc := &profile.Location{ID: fn.ID, Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{60, 600},
			Label: map[string][]string{profkey.RouteLabel: {s.route}}})
	}
	f, _ := os.Create(filepath.Join(dir, "allocs.pb.gz"))
	p.Write(f)
	f.Close()
	s := &schema.Summary{Verdict: VerdictServerBound, Files: map[string]string{"allocs": "allocs.pb.gz"},
		Routes: []schema.RouteSummary{{Route: "GET /a", Requests: 30, AllocsPerReq: f64(2), AllocBytesPerReq: f64(20)}, {Route: "GET /b", Requests: 10, AllocsPerReq: f64(6), AllocBytesPerReq: f64(60)}}}
	ab := &abRun{res: &ABResult{}, shas: map[string]string{"before": "0123456789ab"}, values: map[string]map[string][]float64{"before": {}}, profiles: map[string]map[string][]string{"before": {}}}
	ab.ingest(0, "before", dir, s)
	if v := ab.values["before"]["GET /b allocs/req"]; len(v) != 1 || v[0] != 6 {
		t.Errorf("GET /b allocs/req %v, want [6]", v)
	}
	files := ab.profiles["before"]["GET /b allocs"]
	if len(files) != 1 {
		t.Fatalf("GET /b allocs profiles %v", files)
	}
	q, err := readProfile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Sample) != 1 || leafName(q.Sample[0]) != "main.b" || profkey.Requests(q) != 10 {
		t.Errorf("GET /b's profile: %d samples, requests %d", len(q.Sample), profkey.Requests(q))
	}
}

// TestRoutesCap: a server without a ServeMux (probetarget -mode router),
// whose routes are its paths: with -max-routes 2, it names at most two
// and the rest of the mix is "other", still adding up.
func TestRoutesCap(t *testing.T) {
	skipShort(t)
	file := filepath.Join(t.TempDir(), "mix.txt")
	os.WriteFile(file, []byte("GET /item/a\nGET /item/b\nGET /item/c\nGET /item/d\n"), 0o644)
	m := runTarget(t, "/", "-requests", file, "-offcpu=false", "-max-routes", "2", "-args", "-mode router")
	var s schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(m.dir, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	named, other := 0, uint64(0)
	for _, r := range s.Routes {
		if r.Route == "other" {
			other = r.Requests
		} else {
			named++
		}
	}
	c := s.RoutesClosure
	t.Logf("%d routes named, other %d requests; closure %+v", named, other, *c)
	if named == 0 || named > 2 || other == 0 || c.RouteRequests != uint64(c.DriverRequests) || c.AllocsRemainder != 0 {
		t.Errorf("routes %+v: want at most 2 named, the rest other, adding up", s.Routes)
	}
}

// TestProbeBuild: probe build writes probetarget with the agent and the
// overlays, its build list unchanged; started on its own, without probe,
// it serves as a plain build does.
func TestProbeBuild(t *testing.T) {
	skipShort(t)
	bin := filepath.Join(t.TempDir(), "pt")
	var o, e bytes.Buffer
	if code := Main(context.Background(), []string{"build", "-q", "-o", bin, "./testdata/probetarget"}, &o, &e); code != ExitOK {
		t.Fatalf("probe build: exit %d\n%s%s", code, o.String(), e.String())
	}
	t.Logf("%s", o.String())
	if !strings.Contains(o.String(), "allocspy on, copyspy on, request marks on") || !strings.Contains(o.String(), "0 changed") {
		t.Errorf("probe build said:\n%s", o.String())
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil || !strings.Contains(string(info), "path\tgithub.com/perfspy/perfspy/probe/testdata/probetarget") {
		t.Fatalf("go version -m %s: %v\n%s", bin, err, info)
	}
	_, addr := testtarget.StartBinary(t, bin, nil, "-addr", "127.0.0.1:0")
	drv, err := load.NewHTTP(load.HTTPOptions{URL: "http://" + addr + "/users/7", Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := drv.Run(context.Background(), 300*time.Millisecond)
	drv.Close()
	if err != nil || res.OK == 0 || res.Errors+res.Non2xx != 0 {
		t.Errorf("the built binary served %+v: %v", res, err)
	}
}

// TestRouteFigures: the split of a window by route, from a routes report
// and labelled profiles: a path route whose requests all moved to a
// pattern is folded into it, one whose requests went to two patterns stays
// apart with a note, a route with nothing in the window is left out,
// (before routing) is per request of every route, the background per
// second, and a sample without a route is the remainder.
func TestRouteFigures(t *testing.T) {
	rep := &wire.RouteReport{Routes: []wire.RouteCount{
		{Name: "GET /"},
		{Name: "GET /users/{n}", Into: "GET /users/{id}"},
		{Name: "GET /users/{id}", Requests: 10},
		{Name: "GET /x/{n}", IntoSeveral: true, Requests: 2},
		{Name: profkey.BeforeRouting},
	}}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}}}
	add := func(fn, route string, n int64) {
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: fn}
		loc := &profile.Location{ID: f.ID, Line: []profile.Line{{Function: f}}}
		p.Function, p.Location = append(p.Function, f), append(p.Location, loc)
		s := &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{n, 64 * n}, Label: map[string][]string{}}
		if route != "" {
			s.Label[profkey.RouteLabel] = []string{route}
		}
		p.Sample = append(p.Sample, s)
	}
	add("main.middleware", "GET /users/{n}", 10)
	add("main.user", "GET /users/{id}", 30)
	add("main.x", "GET /x/{n}", 4)
	add("net/http.readRequest", profkey.BeforeRouting, 60)
	add("main.tick", profkey.Background, 5)
	add("main.lost", "", 1)
	// Unfollowed work: from a path route the mux folded (its label folds
	// with it), from a route, and from a queue that held several.
	add("main.orphan", profkey.UnfollowedFrom+"GET /users/{n}", 20)
	add("main.worker", profkey.UnfollowedFrom+"GET /x/{n}", 2)
	add("main.queued", profkey.Unfollowed, 8)
	foldRoutes(p, routeFolds(rep))
	r := routeFigures(rep, p, nil, 12, 2)
	u := r.Unfollowed
	if u.Allocs != 30 || *u.AllocsPerSec != 15 || *u.ShareAllocs != round(30.0/140, 4) || len(u.Origins) != 3 {
		t.Fatalf("unfollowed %+v", u)
	}
	if o := u.Origins[0]; o.Route != "GET /users/{id}" || o.Requests != 10 || *o.AllocsPerReq != 2 || o.Sites[0].Func != "main.orphan" {
		t.Errorf("unfollowed from GET /users/{id}: %+v", o)
	}
	if o := u.Origins[1]; o.Route != "" || o.AllocsPerReq != nil || *o.AllocsPerSec != 4 {
		t.Errorf("unfollowed of no known origin: %+v", o)
	}
	if o := u.Origins[2]; o.Route != "GET /x/{n}" || *o.AllocsPerReq != 1 {
		t.Errorf("unfollowed from GET /x/{n}: %+v", o)
	}
	got := map[string]schema.RouteSummary{}
	for _, rs := range r.Routes {
		got[rs.Route] = rs
	}
	users, x := got["GET /users/{id}"], got["GET /x/{n}"]
	if len(r.Routes) != 2 || users.Allocs != 40 || *users.AllocsPerReq != 4 || x.Note == "" || *x.AllocsPerReq != 2 {
		t.Errorf("routes %+v", r.Routes)
	}
	if users.Sites[0].Func != "main.user" || users.Sites[0].Allocs != 3 || users.Sites[1].Func != "main.middleware" || users.Sites[1].Allocs != 1 {
		t.Errorf("GET /users/{id}'s sites %+v", users.Sites)
	}
	if br := r.BeforeRouting; br == nil || br.Requests != 12 || *br.AllocsPerReq != 5 {
		t.Errorf("before routing %+v", r.BeforeRouting)
	}
	if *r.Background.AllocsPerSec != 2.5 || r.Background.AllocsPerReq != nil || r.Closure.Allocs != 140 || r.Closure.AllocsRemainder != 1 || r.Closure.RouteRequests != 12 {
		t.Errorf("background %+v, closure %+v", r.Background, r.Closure)
	}
}

// TestRoutesSampled: with -sample 16 (live mode's sampling), one request
// in 16 of each route is accounted, the first included, and only those
// requests' work is counted: each route's sites are exact per sampled
// request, the child's goroutine's work included, nothing else is counted
// (the ticker's background neither), and about 1 in 16 is sampled.
func TestRoutesSampled(t *testing.T) {
	skipShort(t)
	file := filepath.Join(t.TempDir(), "mix.txt")
	os.WriteFile(file, []byte("GET /users/42 weight=2\nGET /child\nGET /alloc\nGET /pooled/a\nGET /pooled/b\n"), 0o644)
	// One pool worker: the pool's values wait in its buffer, where a
	// request not sampled leaves no entry (its value carries nothing the
	// count needs) and a sampled one does.
	m := runTarget(t, "/", "-requests", file, "-offcpu=false", "-sample", "16", "-args", "-ticker 2ms -pool 1")
	s, copies := summaryAndCopies(t, m)
	if s.PerRequest.Allocs != nil || !strings.Contains(s.Sources["allocs"], "sampled: one request in 16") {
		t.Errorf("per_request.allocs %v, sources.allocs %q: want none, said why", s.PerRequest.Allocs, s.Sources["allocs"])
	}
	exact := map[string][3]any{
		"GET /users/{id}": {"main.userAlloc", int64(3), int64(0)},
		"GET /child":      {"main.childWork", int64(4), int64(3000)},
		"GET /alloc":      {"main.allocK7", int64(7), int64(0)},
		"GET /pooled/a":   {"main.pooledWork", int64(2), int64(0)},
		"GET /pooled/b":   {"main.pooledWork", int64(5), int64(0)},
	}
	var sum int64
	for _, r := range s.Routes {
		e, ok := exact[r.Route]
		if !ok {
			t.Errorf("unexpected route %s", r.Route)
			continue
		}
		n := int64(r.SampledRequests)
		t.Logf("%s: %d requests, %d sampled, %v allocs per sampled request", r.Route, r.Requests, n, *r.AllocsPerReq)
		if d := n*16 - int64(r.Requests); d < -16 || d > 16 || n == 0 {
			t.Errorf("%s: %d of %d requests sampled, want 1 in 16", r.Route, n, r.Requests)
		}
		if o := routeCount(m.allocs, r.Route, e[0].(string), 0); o != e[1].(int64)*n {
			t.Errorf("%s: %s %d allocations in %d sampled requests, want %d each", r.Route, e[0], o, n, e[1])
		}
		if b := routeCount(copies, r.Route, "main.copyN", 1); b != e[2].(int64)*n {
			t.Errorf("%s: main.copyN %d B in %d sampled requests, want %d each", r.Route, b, n, e[2])
		}
		sum += r.Allocs
	}
	if len(s.Routes) != len(exact) || s.RoutesClosure.AllocsRemainder != 0 || sum != s.RoutesClosure.Allocs || routeCount(m.allocs, profkey.Background, "", 0) != 0 {
		t.Errorf("routes %d, closure %+v, Σ routes %d: only the sampled requests' work may be counted", len(s.Routes), *s.RoutesClosure, sum)
	}
}

// summaryAndCopies reads a run's summary.json and copies.pb.gz.
func summaryAndCopies(t *testing.T, m *measured) (schema.Summary, *profile.Profile) {
	t.Helper()
	var s schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(m.dir, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	copies, err := readProfile(filepath.Join(m.dir, "copies.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return s, copies
}

// TestRoutesGRPC: grpc-go's own server (targets/grpcecho, not net/http)
// labels each call's goroutine with its method (probe sets
// GRPC_GO_SERVER_GOROUTINE_LABELS), and the mark follows the label:
// main.extraAlloc's 3 allocations per call are the method's route, and
// its calls are the driver's.
func TestRoutesGRPC(t *testing.T) {
	skipShort(t)
	// A goroutine per call, and grpc.NumStreamWorkers' pool: the calls
	// handed to its workers over a channel are each their method's, and
	// a worker's bill ends as its next call's labels come.
	for _, args := range []string{"-extra-allocs 3", "-extra-allocs 3 -stream-workers 4"} {
		t.Run(strings.ReplaceAll(args, " ", "_"), func(t *testing.T) { testRoutesGRPC(t, args) })
	}
}

func testRoutesGRPC(t *testing.T, args string) {
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := probeRun(t, "-out", out, "-offcpu=false", "-args", args, "../targets/grpcecho")
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	s, _ := summaryAndCopies(t, &measured{dir: out})
	allocs, err := readProfile(filepath.Join(out, "allocs.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	const method = "perfspy.echo.Echo/Echo"
	if len(s.Routes) != 1 || s.Routes[0].Route != method || s.RoutesClosure == nil {
		t.Fatalf("routes %+v, want %s alone", s.Routes, method)
	}
	r, c := s.Routes[0], s.RoutesClosure
	n := int64(r.Requests)
	t.Logf("%s: %d calls, %v allocs/call; background %v allocs/s; closure %+v", method, n, *r.AllocsPerReq, *s.RoutesBackground.AllocsPerSec, *c)
	if n != c.DriverRequests || c.AllocsRemainder != 0 {
		t.Errorf("closure %+v: the route's calls must be the driver's, with no remainder", *c)
	}
	if o := routeCount(allocs, method, "main.extraAlloc", 0); o != 3*n {
		t.Errorf("main.extraAlloc: %d allocations in %d calls, want 3 per call", o, n)
	}
	if o := routeCount(allocs, profkey.Background, "main.extraAlloc", 0); o != 0 {
		t.Errorf("main.extraAlloc: %d allocations in the background", o)
	}
	// Each call's own bill (taken as grpc-go's labels mark its goroutine,
	// ended as that goroutine exits) holds its 3 allocations there.
	b := s.Bills
	if b == nil || b.Kept < 100 {
		t.Fatalf("bills %+v: want the calls' own", b)
	}
	for _, g := range append([]schema.Bill{*b.Groups["p50"], *b.Groups["p99"]}, b.Exemplars...) {
		var extra float64
		for _, site := range g.Sites {
			if site.Func == "main.extraAlloc" {
				extra += site.Allocs
			}
		}
		if extra != 3 || g.DurationUS <= 0 || g.Route != "" && g.Route != method {
			t.Errorf("a bill of %.0f µs (%s): main.extraAlloc %v, want 3", g.DurationUS, g.Route, extra)
		}
	}
}

// childGoLine is the line of probetarget's `go childWork(done)`.
var childGoLine = func() int64 {
	b, _ := os.ReadFile("testdata/probetarget/main.go")
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "go childWork(done)" {
			return int64(i + 1)
		}
	}
	return -1
}()

// atGoLine tells a sample whose innermost frame is that go statement.
func atGoLine(s *profile.Sample) bool {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
		return false
	}
	ln := s.Location[0].Line[0]
	return ln.Function != nil && ln.Function.Name == "main.childParent" && ln.Line == childGoLine
}

// TestRoutesHandoffs: routes that hand their work to goroutines main
// started (probetarget's handoffs.go) in one mixed window, beside a ticker
// and a background producer feeding the same pool: a pool fed by a
// buffered channel shared by two routes, a resource's owner fed by an
// unbuffered channel, a batcher whose flush the last sender pays for, a
// time.AfterFunc callback, and a queue behind a sync.Cond that cannot be
// followed. Each route's sites are exact per request, the ticker's and the
// producer's work stays in the background, and the closure holds.
func TestRoutesHandoffs(t *testing.T) {
	skipShort(t)
	routesHandoffs(t)
}

// TestRoutesHandoffsARM64 is TestRoutesHandoffs on probetarget built for
// linux/arm64 and run under qemu-user: the handoff table's plain stores and
// loads under arm64's weaker memory order, the same exact routes.
func TestRoutesHandoffsARM64(t *testing.T) {
	emulateARM64(t)
	routesHandoffs(t, "-exec", "qemu-aarch64-static")
}

// routesHandoffs runs the handoff mix (with extra flags) and holds every
// route, the background and the closure to their known costs.
func routesHandoffs(t *testing.T, extra ...string) {
	file := filepath.Join(t.TempDir(), "mix.txt")
	os.WriteFile(file, []byte("GET /pooled/a weight=2\nGET /pooled/b\nGET /owner\nGET /batch/a\nGET /batch/b\nGET /afterfunc\nGET /handoff\nGET /mutexq\nGET /ownafter\n"), 0o644)
	args := append([]string{"-requests", file, "-offcpu=false", "-retained=false", "-args", "-ticker 2ms -producer 1ms"}, extra...)
	m := runTarget(t, "/", args...)
	if extra != nil && m.summary["goarch"] != "arm64" {
		t.Fatalf("goarch %v: want the arm64 build", m.summary["goarch"])
	}
	s, copies := summaryAndCopies(t, m)
	reqs := map[string]int64{}
	for _, r := range s.Routes {
		reqs[r.Route] = int64(r.Requests)
	}
	t.Logf("routes %v, closure %+v", reqs, *s.RoutesClosure)
	const pa, pb, own, ba, bb, after, hand, condq, kept = "GET /pooled/a", "GET /pooled/b", "GET /owner", "GET /batch/a", "GET /batch/b", "GET /afterfunc", "GET /handoff", "GET /mutexq", "GET /ownafter"
	for _, r := range []string{pa, pb, own, ba, bb, after, hand, condq, kept} {
		if reqs[r] == 0 {
			t.Fatalf("routes %v: no %s", reqs, r)
		}
	}
	c := s.RoutesClosure
	if c.RouteRequests != uint64(c.DriverRequests) || c.AllocsRemainder != 0 {
		t.Errorf("closure %+v: the routes' requests must be the driver's, with no remainder", *c)
	}
	all := []string{pa, pb, own, ba, bb, after, hand, condq, kept, profkey.Background, profkey.BeforeRouting}
	exact := []struct {
		route, fn string
		objs      int64 // per request of the route
	}{
		{pa, "main.pooledWork", 2},
		{pb, "main.pooledWork", 5},
		{own, "main.ownerWork", 3},
		{ba, "main.batchItem", 1},
		{bb, "main.batchItem", 1},
		{after, "main.afterWork", 2},
		{hand, "main.handoffWork", 8}, // 4 slices of 1024 B, each put in an interface
		// The request's own goroutine keeps its request after its child
		// ended and after a value from the background.
		{kept, "main.ownAfterWork", 3},
	}
	for _, e := range exact {
		if o := routeCount(m.allocs, e.route, e.fn, 0); o != e.objs*reqs[e.route] {
			t.Errorf("%s: %s %d objects in %d requests; want %d per request", e.route, e.fn, o, reqs[e.route], e.objs)
		}
	}
	// Copies follow the handoff too: the owner's copy is /owner's.
	for _, r := range all {
		want := int64(0)
		if r == own {
			want = 700 * reqs[own]
		}
		if b := routeCount(copies, r, "main.ownerCopy", 1); b != want {
			t.Errorf("main.ownerCopy: %d B copied under %s, want %d (700 B per %s request)", b, r, want, own)
		}
	}
	// Only the routes named above, and the background producer's jobs
	// (7 each), reach the workers' sites.
	for _, fn := range []string{"main.pooledWork", "main.ownerWork", "main.batchItem", "main.afterWork", "main.handoffWork", "main.ownAfterWork"} {
		for _, r := range all {
			named := slices.ContainsFunc(exact, func(e struct {
				route, fn string
				objs      int64
			}) bool {
				return e.route == r && e.fn == fn
			})
			if n := routeCount(m.allocs, r, fn, 0); !named && n != 0 && !(fn == "main.pooledWork" && r == profkey.Background) {
				t.Errorf("%s: %d objects charged to %s", fn, n, r)
			}
		}
	}
	if bg := routeCount(m.allocs, profkey.Background, "main.pooledWork", 0); bg == 0 || bg%7 != 0 {
		t.Errorf("the producer's jobs: %d objects of main.pooledWork in the background, want a positive multiple of 7", bg)
	}
	// The batcher: the flush is the last sender's.
	for fn, r := range map[string]string{"main.batchFlushA": ba, "main.batchFlushB": bb} {
		for _, other := range all {
			if n := routeCount(m.allocs, other, fn, 0); other != r && n != 0 {
				t.Errorf("%s (the flush after %s's item): %d objects charged to %s", fn, r, n, other)
			}
		}
		if routeCount(m.allocs, r, fn, 0) == 0 {
			t.Errorf("%s: no flush charged to %s", fn, r)
		}
	}
	// A queue guarded by a mutex and a sync.Cond: the Cond's Signal
	// hands the request to the worker it wakes; a job the worker takes
	// without a wake (it was busy when the Signal came) is unfollowed
	// work from the request it handed back, never another route's or the
	// background's.
	condOwn, condUnf := routeCount(m.allocs, condq, "main.condWork", 0), routeCount(m.allocs, profkey.UnfollowedFrom+condq, "main.condWork", 0)
	if condOwn+condUnf != 4*reqs[condq] || condOwn == 0 || condOwn%4 != 0 {
		t.Errorf("main.condWork: %d objects under %s and %d unfollowed from it, want 4 per request (%d) in all, most of them its own", condOwn, condq, condUnf, reqs[condq])
	}
	t.Logf("main.condWork: %d under %s, %d unfollowed from it", condOwn, condq, condUnf)
	for _, r := range all {
		if n := routeCount(m.allocs, r, "main.condWork", 0); r != condq && n != 0 {
			t.Errorf("main.condWork: %d objects charged to %s", n, r)
		}
	}
	for _, r := range all {
		if n := routeCount(m.allocs, r, "main.tickAlloc", 0); r != profkey.Background && n != 0 {
			t.Errorf("the ticker's allocations charged to %s: %d", r, n)
		}
	}
	bg := s.RoutesBackground
	if bg == nil || bg.ShareBytes == nil || bg.ShareAllocs == nil || *bg.ShareBytes <= 0 || *bg.ShareBytes >= 1 {
		t.Fatalf("routes_background %+v: want its share of the window", bg)
	}
	var bytes int64
	for _, smp := range m.allocs.Sample {
		bytes += smp.Value[1]
	}
	if want := float64(bg.AllocBytes) / float64(bytes); math.Abs(*bg.ShareBytes-want) > 1e-4 {
		t.Errorf("background share %.4f of the bytes, the profile's %.4f", *bg.ShareBytes, want)
	}
	t.Logf("background: %.4f of the allocations, %.4f of the bytes", *bg.ShareAllocs, *bg.ShareBytes)
}
