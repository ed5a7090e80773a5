package probe

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/profkey"
)

// TestRoutesUnfollowed holds probetarget's unfollowed routes
// (testdata/probetarget/unfollowed.go) to their known costs in one mixed
// window: work that a mutex-guarded queue carries, a goroutine that
// outlives its request and a ticker's flusher a request started are never
// on another route, and never on their own route when no request held
// them: they are the unfollowed figure, by route of origin.
func TestRoutesUnfollowed(t *testing.T) {
	skipShort(t)
	file := filepath.Join(t.TempDir(), "mix.txt")
	os.WriteFile(file, []byte("GET /mq/a\nGET /mq/b\nGET /orphan\nGET /flush\n"), 0o644)
	m := runTarget(t, "/", "-requests", file, "-offcpu=false", "-retained=false", "-conns", "8")
	s, _ := summaryAndCopies(t, m)
	reqs := map[string]int64{}
	for _, r := range s.Routes {
		reqs[r.Route] = int64(r.Requests)
	}
	const ma, mb, orphan, flush = "GET /mq/a", "GET /mq/b", "GET /orphan", "GET /flush"
	for _, r := range []string{ma, mb, orphan, flush} {
		if reqs[r] == 0 {
			t.Fatalf("routes %v: no %s", reqs, r)
		}
	}
	if c := s.RoutesClosure; c.RouteRequests != uint64(c.DriverRequests) || c.AllocsRemainder != 0 {
		t.Errorf("closure %+v: the routes' requests must be the driver's, with no remainder", *c)
	}
	// Every label of the profile, and what each holds of a site.
	labels := map[string]bool{}
	for _, smp := range m.allocs.Sample {
		labels[routeOf(smp)] = true
	}
	byLabel := func(fn string) (routes map[string]int64, unfollowed int64) {
		routes = map[string]int64{}
		for l := range labels {
			n := routeCount(m.allocs, l, fn, 0)
			if _, ok := profkey.UnfollowedOrigin(l); ok {
				unfollowed += n
			} else if n != 0 {
				routes[l] = n
			}
		}
		return routes, unfollowed
	}
	// The pool's tasks: 2 a request of /mq/a, 5 of /mq/b, each either on
	// its own route or unfollowed, never on the other route or the
	// background. Both routes' tasks share main.mqTask: per route, the
	// sizes tell nothing apart, so the route's own count must be at most
	// its own and the rest unfollowed.
	routes, unf := byLabel("main.mqTask")
	total := unf
	for r, n := range routes {
		total += n
		if r != ma && r != mb {
			t.Errorf("main.mqTask: %d objects charged to %s", n, r)
		}
	}
	if want := 2*reqs[ma] + 5*reqs[mb]; total != want {
		t.Errorf("main.mqTask: %d objects in all, want %d (2 per %s request, 5 per %s)", total, want, ma, mb)
	}
	// A route's own count is whole tasks of its own: a multiple of its
	// size, and no more than its requests made.
	if n := routes[ma]; n%2 != 0 || n > 2*reqs[ma] {
		t.Errorf("main.mqTask under %s: %d objects in %d requests: not whole tasks of 2 of its own", ma, n, reqs[ma])
	}
	if n := routes[mb]; n%5 != 0 || n > 5*reqs[mb] {
		t.Errorf("main.mqTask under %s: %d objects in %d requests: not whole tasks of 5 of its own", mb, n, reqs[mb])
	}
	t.Logf("main.mqTask: %d under %s (%d requests), %d under %s (%d), %d unfollowed", routes[ma], ma, reqs[ma], routes[mb], mb, reqs[mb], unf)
	// The goroutine that outlives its request: unfollowed from its route.
	routes, unf = byLabel("main.orphanWork")
	if len(routes) != 0 {
		t.Errorf("main.orphanWork charged to routes %v: it runs after its request ended", routes)
	}
	from := routeCount(m.allocs, profkey.UnfollowedFrom+orphan, "main.orphanWork", 0)
	if from != unf || from == 0 || abs64(from-3*reqs[orphan]) > 3*16 {
		t.Errorf("main.orphanWork: %d unfollowed from %s, %d unfollowed in all; want about 3 per request (%d requests, the window's edges aside)", from, orphan, unf, reqs[orphan])
	}
	// The flusher on a ticker: no route's, and each request's own item
	// is its route's exactly.
	routes, unf = byLabel("main.flushTick")
	for r, n := range routes {
		if r != profkey.Background {
			t.Errorf("main.flushTick (a ticker's flusher): %d objects charged to %s", n, r)
		}
	}
	if routes[profkey.Background]+unf == 0 {
		t.Errorf("main.flushTick: no tick in the window")
	}
	if n := routeCount(m.allocs, flush, "main.flushItem", 0); n != reqs[flush] {
		t.Errorf("main.flushItem: %d under %s in %d requests, want 1 per request", n, flush, reqs[flush])
	}
	// The summary names the unfollowed work, by origin, and its share.
	u := s.RoutesUnfollowed
	if u == nil || u.ShareBytes == nil || *u.ShareBytes <= 0 {
		t.Fatalf("routes_unfollowed %+v: want its share of the window", u)
	}
	var origins []string
	for _, o := range u.Origins {
		origins = append(origins, o.Route)
		if o.Route == orphan && (o.AllocsPerReq == nil || *o.AllocsPerReq < 2.5 || *o.AllocsPerReq > 3.5) {
			t.Errorf("routes_unfollowed.origins[%s] %+v: want about 3 allocations per request of the route", orphan, o)
		}
	}
	if !strings.Contains(strings.Join(origins, ","), orphan) {
		t.Errorf("routes_unfollowed.origins %v: want %s", origins, orphan)
	}
	t.Logf("unfollowed: %.4f of the bytes, %.4f of the allocations, origins %v", *u.ShareBytes, *u.ShareAllocs, origins)
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestRoutesHandoffsLost: a route that fills the runtime's handoff table
// (/flood: thousands of buffered channels with a value each, dropped)
// beside routes whose work a pool's buffered channel (/pooled/a, /pooled/b)
// or a time.AfterFunc (/afterfunc) carries. A handoff whose entry another
// key took is counted (routes_closure.handoffs_lost) and its work is
// "(unfollowed)", never the route the worker served before nor the
// background: each route's own count is whole tasks of its own, and own
// plus unfollowed is the routes' known cost.
func TestRoutesHandoffsLost(t *testing.T) {
	skipShort(t)
	file := filepath.Join(t.TempDir(), "mix.txt")
	os.WriteFile(file, []byte("GET /pooled/a weight=4\nGET /pooled/b weight=4\nGET /afterfunc weight=4\nGET /flood?n=8192\n"), 0o644)
	// One worker: the pool's values wait in its buffer, in the table.
	m := runTarget(t, "/", "-requests", file, "-offcpu=false", "-retained=false", "-conns", "8", "-args", "-pool 1")
	s, _ := summaryAndCopies(t, m)
	reqs := map[string]int64{}
	for _, r := range s.Routes {
		reqs[r.Route] = int64(r.Requests)
	}
	const pa, pb, after = "GET /pooled/a", "GET /pooled/b", "GET /afterfunc"
	c := s.RoutesClosure
	if c == nil || c.RouteRequests != uint64(c.DriverRequests) || c.AllocsRemainder != 0 {
		t.Fatalf("closure %+v: the routes' requests must be the driver's, with no remainder", c)
	}
	labels := map[string]bool{}
	for _, smp := range m.allocs.Sample {
		labels[routeOf(smp)] = true
	}
	var lostTasks int64
	for _, e := range []struct {
		fn     string
		routes map[string]int64 // objects per request of each route whose work it is
	}{
		{"main.pooledWork", map[string]int64{pa: 2, pb: 5}},
		{"main.afterWork", map[string]int64{after: 2}},
	} {
		var want, total, unf int64
		for r, n := range e.routes {
			want += n * reqs[r]
			own := routeCount(m.allocs, r, e.fn, 0)
			if own%n != 0 || own > n*reqs[r] {
				t.Errorf("%s under %s: %d objects in %d requests: not whole tasks of %d of its own", e.fn, r, own, reqs[r], n)
			}
		}
		for l := range labels {
			k := routeCount(m.allocs, l, e.fn, 0)
			if _, ok := e.routes[l]; ok {
				total += k
				continue
			}
			if l == profkey.Unfollowed {
				unf = k
				total += k
				continue
			}
			if k != 0 {
				t.Errorf("%s: %d objects charged to %q", e.fn, k, l)
			}
		}
		if total != want {
			t.Errorf("%s: %d objects in all, want %d", e.fn, total, want)
		}
		t.Logf("%s: %d of %d objects unfollowed (origin unknown)", e.fn, unf, want)
		// A lost task is at most the largest task: at least this many.
		var most int64
		for _, n := range e.routes {
			most = max(most, n)
		}
		lostTasks += (unf + most - 1) / most
		if unf > 0 && lostTasks > int64(c.HandoffsLost) {
			t.Errorf("%s: %d objects unfollowed, more tasks than the %d handoffs lost", e.fn, unf, c.HandoffsLost)
		}
	}
	if c.HandoffsLost == 0 || lostTasks == 0 {
		t.Errorf("handoffs_lost %d, %d tasks' work unfollowed: the flood lost no handoff the test could see", c.HandoffsLost, lostTasks)
	}
	t.Logf("handoffs lost %d, goroutines orphaned %d", c.HandoffsLost, c.Orphaned)
	if out := readFile(t, filepath.Join(m.dir, "report.md")); !strings.Contains(out, "**Handoffs lost**: "+strconv.FormatUint(c.HandoffsLost, 10)+" values") {
		t.Errorf("report.md does not say how many handoffs were lost")
	}
}
