package spytable

import (
	_ "unsafe" // for go:linkname

	"github.com/perfspy/perfspy/agent"
	"github.com/perfspy/perfspy/agent/wire"
)

// The route table of the request mark, added to the runtime with
// allocspy's and copyspy's overlays (zz_perfspy_mark.go).
//
//go:linkname perfspyRouteRead runtime.perfspyRouteRead
func perfspyRouteRead(names []string, reqs []uint64, into []uint32) int

// routeSlots is the runtime's table size (perfspyRouteSlots).
const routeSlots = 1024

// Routes reads the route table: names by index (0, the background, has
// none), requests ended under each, and the route each moved into.
func Routes() (names []string, reqs []uint64, into []uint32) {
	names, reqs, into = make([]string, routeSlots), make([]uint64, routeSlots), make([]uint32, routeSlots)
	n := perfspyRouteRead(names, reqs, into)
	return names[:n], reqs[:n], into[:n]
}

// RouteName names a slot's route word: "" for the background.
func RouteName(names []string, mark uint64) string {
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
type routeCounter struct{ before []uint64 }

func (c *routeCounter) Begin() error {
	_, c.before, _ = Routes()
	return nil
}

func (c *routeCounter) End(path string) error {
	names, reqs, into := Routes()
	var rep wire.RouteReport
	for i := 1; i < len(names); i++ {
		rc := wire.RouteCount{Name: names[i], Requests: reqs[i]}
		if i < len(c.before) {
			rc.Requests -= c.before[i]
		}
		switch v := into[i]; {
		case v == ^uint32(0):
			rc.IntoSeveral = true
		case v != 0:
			rc.Into = RouteName(names, uint64(v))
		}
		rep.Routes = append(rep.Routes, rc)
	}
	return wire.WriteJSON(path, &rep)
}
