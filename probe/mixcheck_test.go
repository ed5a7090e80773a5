package probe

import (
	"strings"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestMixCheck: a route is named when its mix figure differs from its
// alone figure beyond noise (allocations or bytes), with the reason that
// fits, and not when the two agree within it.
func TestMixCheck(t *testing.T) {
	route := func(a, b float64) schema.RouteSummary {
		return schema.RouteSummary{Route: "GET /a", AllocsPerReq: &a, AllocBytesPerReq: &b}
	}
	alone := func(a, b float64) schema.EndpointSummary {
		return schema.EndpointSummary{Name: "GET /a", Route: "GET /a", RouteAllocs: &a, RouteAllocBytes: &b}
	}
	three := 3.0
	for _, c := range []struct {
		name        string
		mix         schema.RouteSummary
		alone       schema.EndpointSummary
		unf         *schema.RouteSummary
		named       bool
		noteContain string
	}{
		{"equal", route(5, 400), alone(5, 400), nil, false, ""},
		{"within noise", route(20.3, 4000), alone(20, 3990), nil, false, ""},
		{"more in the mix", route(9, 900), alone(5, 400), nil, true, "more in the mix"},
		{"less in the mix", route(2, 160), alone(5, 400), nil, true, "less in the mix"},
		{"bytes only", route(5, 800), alone(5, 400), nil, true, "more in the mix"},
		{"unfollowed", route(2, 160), alone(5, 400), &schema.RouteSummary{AllocsPerReq: &three}, true, "3.00 allocations a request"},
	} {
		got, named := mixDiffers(c.mix, c.alone, c.unf)
		if named != c.named || named && !strings.Contains(got.Note, c.noteContain) {
			t.Errorf("%s: named %v, %+v; want named %v with %q", c.name, named, got, c.named, c.noteContain)
		}
	}
}
