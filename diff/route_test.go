package diff

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/profkey"
)

// routed makes an allocation profile of two routes, as probe run writes
// it: main.users under GET /users/{id} (n per request of its 30), main.other
// under GET /other (10 requests).
func routed(n int64) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}},
		Comments: []string{profkey.RequestsComment + "40", profkey.RouteRequestsComment + "30 GET /users/{id}", profkey.RouteRequestsComment + "10 GET /other"}}
	for i, s := range []struct {
		fn, route string
		v         int64
	}{{"main.users", "GET /users/{id}", 30 * n}, {"main.other", "GET /other", 500}} {
		fn := &profile.Function{ID: uint64(i + 1), Name: s.fn}
		loc := &profile.Location{ID: fn.ID, Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{s.v},
			Label: map[string][]string{profkey.RouteLabel: {s.route}}})
	}
	return p
}

// TestRouteFlag: allocdiff -route compares one route per request of that
// route; an unknown route is an error naming the routes.
func TestRouteFlag(t *testing.T) {
	dir := t.TempDir()
	b, a := filepath.Join(dir, "before.pb.gz"), filepath.Join(dir, "after.pb.gz")
	os.WriteFile(b, encode(t, routed(3)), 0o644)
	os.WriteFile(a, encode(t, routed(5)), 0o644)
	var o, e bytes.Buffer
	if code := Command([]string{"-route", "GET /users/{id}", b, a}, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	out := o.String()
	if !strings.Contains(out, "main.users") || strings.Contains(out, "main.other") || !strings.Contains(out, "3.00") || !strings.Contains(out, "5.00") {
		t.Errorf("allocdiff -route: want main.users 3.00 -> 5.00 per request and no main.other:\n%s", out)
	}
	o.Reset()
	e.Reset()
	if code := Command([]string{"-route", "GET /nope", b, a}, &o, &e); code != 1 || !strings.Contains(e.String(), `"GET /other"`) {
		t.Errorf("unknown route: exit %d, %q", code, e.String())
	}
}
