package flame

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/profkey"
)

// TestRouteFlag: flame -route draws one route's samples only.
func TestRouteFlag(t *testing.T) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}}}
	for i, s := range []struct{ fn, route string }{{"main.users", "GET /users/{id}"}, {"main.tick", profkey.Background}} {
		fn := &profile.Function{ID: uint64(i + 1), Name: s.fn}
		loc := &profile.Location{ID: fn.ID, Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{7},
			Label: map[string][]string{profkey.RouteLabel: {s.route}}})
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "allocs.pb.gz")
	os.WriteFile(in, buf.Bytes(), 0o644)
	for route, want := range map[string]string{"GET /users/{id}": "main.users", profkey.Background: "main.tick"} {
		var o, e bytes.Buffer
		if code := Command([]string{"-route", route, in}, &o, &e); code != 0 {
			t.Fatalf("-route %s: exit %d: %s", route, code, e.String())
		}
		other := "main.tick"
		if want == "main.tick" {
			other = "main.users"
		}
		if svg := o.String(); !strings.Contains(svg, want) || strings.Contains(svg, other) {
			t.Errorf("-route %s: want %s and not %s", route, want, other)
		}
	}
	var o, e bytes.Buffer
	if code := Command([]string{"-route", "GET /x", in}, &o, &e); code != 1 || !strings.Contains(e.String(), "background") {
		t.Errorf("unknown route: exit %d, %q", code, e.String())
	}
}
