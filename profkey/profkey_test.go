package profkey

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

func TestFuncKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"main.main.func1", "main.main.func*"},
		{"main.main.func12.3", "main.main.func*"},
		{"main.(*T).run.func2.1", "main.(*T).run.func*"},
		{"net/http.(*Server).Serve.gowrap3", "net/http.(*Server).Serve.gowrap*"},
		{"main.f.deferwrap1", "main.f.deferwrap*"},
		{"example.com/p.glob..func7", "example.com/p.glob..func*"},
		{"encoding/json.appendString[go.shape.string]", "encoding/json.appendString[...]"},
		{"encoding/json.appendString[...]", "encoding/json.appendString[...]"},
		{"example.com/p.Map[map[string]int,int].Get", "example.com/p.Map[...].Get"},
		{"example.com/p.(*List[go.shape.int]).Push", "example.com/p.(*List[...]).Push"},
		{"runtime.memmove.abi0", "runtime.memmove"},
		{"encoding/json.arrayEncoder.encode-fm", "encoding/json.arrayEncoder.encode"},
		{"github.com/a/b/v2.F", "github.com/a/b/vN.F"},
		{"github.com/a/b/v2/c.F", "github.com/a/b/vN/c.F"},
		{"github.com/a/b/v2.(*T).v3", "github.com/a/b/vN.(*T).v3"},
		{"vendor/golang.org/x/net/http2.(*Framer).ReadFrame", "golang.org/x/net/http2.(*Framer).ReadFrame"},
		{"example.com/app/vendor/github.com/x/y.F", "github.com/x/y.F"},
		{"main.funcName", "main.funcName"},
		{"runtime.mallocgc", "runtime.mallocgc"},
	} {
		if got := FuncKey(tc.in, DefaultFolds); got != tc.want {
			t.Errorf("FuncKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := FuncKey(tc.in, Folds{}); got != tc.in {
			t.Errorf("FuncKey(%q) with no folds = %q", tc.in, got)
		}
	}
}

func TestRequests(t *testing.T) {
	for _, tc := range []struct {
		comments []string
		want     int64
	}{
		{[]string{"perfspy.target=x", "perfspy.requests=1250"}, 1250},
		{[]string{"perfspy.requests=0"}, 0},
		{[]string{"perfspy.requests=-3"}, 0},
		{[]string{"perfspy.requests=many"}, 0},
		{nil, 0},
	} {
		if got := Requests(&profile.Profile{Comments: tc.comments}); got != tc.want {
			t.Errorf("Requests(%q) = %d, want %d", tc.comments, got, tc.want)
		}
	}
}

// TestSelectRoute: one route's samples, divided by its own requests; the
// background's are totals; an unknown route names the routes there are.
func TestSelectRoute(t *testing.T) {
	mk := func() *profile.Profile {
		p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}},
			Comments: []string{RequestsComment + "40", RouteRequestsComment + "30 GET /a/{id}", RouteRequestsComment + "10 GET /b"}}
		for _, r := range []string{"GET /a/{id}", "GET /b", Background, BeforeRouting, "GET /a/{id}"} {
			p.Sample = append(p.Sample, &profile.Sample{Value: []int64{1}, Label: map[string][]string{RouteLabel: {r}}})
		}
		return p
	}
	for _, c := range []struct {
		route   string
		samples int
		reqs    int64
	}{{"GET /a/{id}", 2, 30}, {"GET /b", 1, 10}, {BeforeRouting, 1, 40}, {Background, 1, 0}} {
		p := mk()
		if err := SelectRoute(p, c.route); err != nil {
			t.Fatal(err)
		}
		if len(p.Sample) != c.samples || Requests(p) != c.reqs {
			t.Errorf("%s: %d samples, %d requests; want %d, %d", c.route, len(p.Sample), Requests(p), c.samples, c.reqs)
		}
	}
	if err := SelectRoute(mk(), "GET /c"); err == nil || !strings.Contains(err.Error(), `"GET /b"`) {
		t.Errorf("unknown route: %v", err)
	}
	p := mk()
	for _, s := range p.Sample {
		s.Label = nil
	}
	if err := SelectRoute(p, "GET /b"); err == nil || !strings.Contains(err.Error(), "no \"route\" labels") {
		t.Errorf("no labels: %v", err)
	}
}

// TestTrimStd: a sample's standard-library leaves give way to the
// module's function that called them; one of the library's alone stays.
func TestTrimStd(t *testing.T) {
	loc := func(names ...string) *profile.Location {
		l := &profile.Location{}
		for _, n := range names {
			l.Line = append(l.Line, profile.Line{Function: &profile.Function{Name: n}})
		}
		return l
	}
	mod := &profile.Sample{Location: []*profile.Location{loc("internal/bytealg.MakeNoZero"), loc("strings.(*Builder).grow", "strings.(*Builder).WriteString"), loc("github.com/a/b.Render"), loc("main.main")}}
	inl := &profile.Sample{Location: []*profile.Location{loc("strconv.Itoa", "github.com/a/b.label"), loc("main.main")}}
	std := &profile.Sample{Location: []*profile.Location{loc("fmt.Sprintf"), loc("net/http.(*conn).serve")}}
	p := &profile.Profile{Sample: []*profile.Sample{mod, inl, std}}
	TrimStd(p)
	if got := mod.Location[0].Line[0].Function.Name; got != "github.com/a/b.Render" {
		t.Errorf("leaf %s, want the module's function", got)
	}
	if len(inl.Location) != 2 || len(std.Location) != 2 {
		t.Errorf("a location with the module's inlined frame, or the library alone: trimmed to %d and %d", len(inl.Location), len(std.Location))
	}
	for name, want := range map[string]bool{"strings.Repeat": true, "net/http.Get": true, "main.main": false, "github.com/a/b.F": false, "example.com/x.(*T).M": false, "unknown": false} {
		if StdFunc(name) != want {
			t.Errorf("StdFunc(%s) = %v", name, !want)
		}
	}
}

// TestScalePerRequest: values divided by the requests, rounded by largest
// remainder (each total the exact one, rounded), samples that round to 0
// left out, the requests comment made per; refused without a count or
// twice.
func TestScalePerRequest(t *testing.T) {
	mk := func() *profile.Profile {
		return &profile.Profile{
			SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}},
			Sample: []*profile.Sample{
				{Value: []int64{3000, 192000}}, // 3 a request, 192 B
				{Value: []int64{500, 8000}},    // 0.5, 8 B
				{Value: []int64{499, 7984}},    // 0.499, 7.984 B
				{Value: []int64{1, 16}},        // 0.001: rounds to 0
			},
			Comments: []string{RequestsComment + "1000", RouteRequestsComment + "1000 GET /a", "other"},
		}
	}
	p := mk()
	if err := ScalePerRequest(p, 1); err != nil {
		t.Fatal(err)
	}
	var got [][]int64
	for _, s := range p.Sample {
		got = append(got, s.Value)
	}
	// 4.0 allocs a request in all: 3 + (0.5 and 0.499 give one more
	// between them, the larger remainder first); 208 B exactly.
	want := [][]int64{{3, 192}, {1, 8}, {0, 8}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("values %v, want %v", got, want)
	}
	if Requests(p) != 1 || RouteRequests(p) != nil || !slices.Contains(p.Comments, "other") {
		t.Errorf("comments %q: want requests=1, no route counts, the others kept", p.Comments)
	}
	if err := ScalePerRequest(p, 1); err == nil {
		t.Error("scaled twice")
	}
	p = mk()
	if err := ScalePerRequest(p, 1000); err != nil || p.Sample[3].Value[0] != 1 || Requests(p) != 1000 {
		t.Errorf("per 1000: %v, %v", err, p.Sample)
	}
	p = mk()
	p.Comments = nil
	if err := ScalePerRequest(p, 1); err == nil || !strings.Contains(err.Error(), RequestsComment) {
		t.Errorf("no count: %v", err)
	}
}
