package spytable

import (
	"os"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/perfspy/perfspy/agent"
	"github.com/perfspy/perfspy/agent/wire"
)

// The route table of the request mark, added to the runtime with
// allocspy's and copyspy's overlays (zz_perfspy_mark.go).
//
//go:linkname perfspyRouteRead runtime.perfspyRouteRead
func perfspyRouteRead(names []string, reqs, sampled []uint64, into []uint32) int

//go:linkname perfspyRoutePeriod runtime.perfspyRoutePeriod
func perfspyRoutePeriod()

//go:linkname perfspyHandLostRead runtime.perfspyHandLostRead
func perfspyHandLostRead() uint64

//go:linkname perfspyOrphansRead runtime.perfspyOrphansRead
func perfspyOrphansRead() uint64

// routeSlots is the runtime's table size (perfspyRouteSlots).
const routeSlots = 1024

// routeTable is the route table read once: names by index (0, the
// background, has none), requests ended under each, those of them that
// were sampled, and the route each moved into.
type routeTable struct {
	names        []string
	reqs, sample []uint64
	into         []uint32
}

func readRoutes() routeTable {
	t := routeTable{make([]string, routeSlots), make([]uint64, routeSlots), make([]uint64, routeSlots), make([]uint32, routeSlots)}
	n := perfspyRouteRead(t.names, t.reqs, t.sample, t.into)
	return routeTable{t.names[:n], t.reqs[:n], t.sample[:n], t.into[:n]}
}

// Routes reads the routes' names, by index.
func Routes() (names []string) { return readRoutes().names }

// RoutePeriod is one route's requests in a live period.
type RoutePeriod struct {
	Name              string
	Requests, Sampled uint64
}

// RoutePeriods reads the route table period after period.
type RoutePeriods struct{ before routeTable }

// Next returns the routes' requests since the last call (the first: since
// the process began), and starts a new sampling period: each route's next
// request is sampled, so that a route seen fewer than N times in a period
// still has one.
func (p *RoutePeriods) Next() (names []string, routes []RoutePeriod) {
	t := readRoutes()
	perfspyRoutePeriod()
	for i := 1; i < len(t.names); i++ {
		r := RoutePeriod{Name: t.names[i], Requests: t.reqs[i], Sampled: t.sample[i]}
		if i < len(p.before.reqs) {
			r.Requests -= p.before.reqs[i]
			r.Sampled -= p.before.sample[i]
		}
		routes = append(routes, r)
	}
	p.before = t
	return t.names, routes
}

// markBits are the mark's bits that are not the route: a sampled request
// (runtime.perfspySampledBit), a mark a goroutine label set
// (runtime.perfspyLabelBit).
const markBits = 1<<62 | 1<<61

// afterBit marks work done under a request's mark once the request no
// longer had it (runtime.perfspyAfterBit): the rest is the route it came
// from, 0 when unknown.
const afterBit = 1 << 60

// Unfollowed is the route name of work done under the mark of a request
// that no longer had it (profkey.Unfollowed); UnfollowedFrom prefixes the
// route it came from when that is known.
const (
	Unfollowed     = "(unfollowed)"
	UnfollowedFrom = "(unfollowed) from "
)

// Sampled tells whether the target samples requests (wire.SampleN): the
// recorders then count only sampled requests' work.
func Sampled() bool { return wire.SampleN(os.Getenv) > 0 }

// RouteName names a slot's route word: "" for the background.
func RouteName(names []string, mark uint64) string {
	if mark&afterBit != 0 {
		if origin := RouteName(names, mark&^afterBit); origin != "" {
			return UnfollowedFrom + origin
		}
		return Unfollowed
	}
	mark &^= markBits
	if mark == 0 || mark >= uint64(len(names)) {
		if mark != 0 {
			return "(unnamed route)"
		}
		return ""
	}
	return names[mark]
}

func init() { agent.RegisterCounter("routes", &routeCounter{}) }

// routeCounter counts the requests that ended under each route in a
// window.
type routeCounter struct {
	before         routeTable
	lost, orphaned uint64
}

func (c *routeCounter) Begin() error {
	settle()
	c.before = readRoutes()
	c.lost, c.orphaned = perfspyHandLostRead(), perfspyOrphansRead()
	return nil
}

//go:linkname perfspyRequestsInFlight runtime.perfspyRequestsInFlight
func perfspyRequestsInFlight() int64

// settle waits, at most 100 ms, for the requests in flight to end: a
// window opens and closes with the load stopped, and the driver has
// counted a request once its response arrived, which can be before the
// server's handler returns and the request's end is counted (a busy
// machine's scheduler between the two). A request that never ends (a
// hijacked connection) leaves it waiting the 100 ms.
func settle() {
	for i := 0; i < 200 && perfspyRequestsInFlight() > 0; i++ {
		time.Sleep(500 * time.Microsecond)
	}
}

func (c *routeCounter) End(path string) error {
	settle()
	t := readRoutes()
	rep := wire.RouteReport{Sampled: Sampled(), HandLost: perfspyHandLostRead() - c.lost, Orphaned: perfspyOrphansRead() - c.orphaned}
	for i := 1; i < len(t.names); i++ {
		rc := wire.RouteCount{Name: t.names[i], Requests: t.reqs[i], SampledRequests: t.sample[i]}
		if i < len(c.before.reqs) {
			rc.Requests -= c.before.reqs[i]
			rc.SampledRequests -= c.before.sample[i]
		}
		switch v := t.into[i]; {
		case v == ^uint32(0):
			rc.IntoSeveral = true
		case v != 0:
			rc.Into = RouteName(t.names, uint64(v))
		}
		rep.Routes = append(rep.Routes, rc)
	}
	return wire.WriteJSON(path, &rep)
}
