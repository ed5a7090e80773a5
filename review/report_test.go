package review

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/schema"
)

// bigResult is a review with n changed routes, each with functions and
// annotated lines.
func bigResult(n int) *Result {
	gate := 0.0
	it := &schema.ReviewItem{Kind: "server", Name: "api", Route: "the request mix"}
	r := &Result{Review: schema.Review{Base: map[string]string{"rev": "main", "commit": "aaaaaaaaaaaaaaaa"}, Head: map[string]string{"rev": "HEAD", "commit": "bbbbbbbbbbbbbbbb"},
		Verdict: "fail", Config: ".perfspy.yml", Items: []*schema.ReviewItem{it}}}
	for i := range n {
		route := fmt.Sprintf("GET /route/%d|`*[x]", i)
		it.Changes = append(it.Changes, schema.ReviewChange{Subject: route, Metric: "allocs/req", Before: 10, After: 11, Delta: 1, DeltaPct: 10, Verdict: "regression", Gate: &gate, Failed: true, Profile: route + " allocs"})
		for j := range 5 {
			it.Functions = append(it.Functions, schema.ABFunction{Profile: route + " allocs", Key: fmt.Sprintf("example.com/app/pkg%d.Func%d", i, j), Before: 1, After: 2, Delta: 1, Sample: "alloc_objects"})
		}
		r.Annotations = append(r.Annotations, schema.Annotation{Level: "error", File: "app/h.go", Line: i + 1, Func: "main.h", Item: "api", Subject: route, Metric: "allocs/req", Delta: 1, Message: "+1.00 allocs/req (+64 B) in " + route})
		r.GateFailed = append(r.GateFailed, route)
	}
	return r
}

// TestMarkdownLimit: however many changes, review.md stays under the limit,
// every table it holds is whole, and a note says what was left out.
func TestMarkdownLimit(t *testing.T) {
	for _, n := range []int{1, 50, 3000} {
		md := bigResult(n).Markdown(CommentLimit)
		if len(md) > CommentLimit {
			t.Errorf("%d changes: %d bytes, over %d", n, len(md), CommentLimit)
		}
		if !strings.HasPrefix(md, CommentMarker+"\n") {
			t.Errorf("%d changes: no marker", n)
		}
		if cut := strings.Contains(md, "left out to stay under GitHub's comment size") || strings.Contains(md, "cut to stay under"); cut != (n == 3000) {
			t.Errorf("%d changes: note of sections left out %v", n, cut)
		}
		// A table's rows all have the header's cells.
		cells := 0
		for _, l := range strings.Split(md, "\n") {
			if !strings.HasPrefix(l, "|") {
				cells = 0
				continue
			}
			n := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|")
			if cells == 0 {
				cells = n
			} else if n != cells {
				t.Errorf("%d changes: a broken table row: %q", n, l)
				break
			}
		}
	}
}

func TestMapLine(t *testing.T) {
	// Base lines 3-4 became head lines 3-5; 2 lines were added after base
	// line 10; base line 20 was removed.
	hunks := parseHunks("diff --git a/x b/x\n@@ -3,2 +3,3 @@ func f\n-a\n-b\n+a\n+b\n+c\n@@ -10,0 +12,2 @@\n+x\n+y\n@@ -20 +23,0 @@\n-z\n")
	for base, want := range map[int]int{1: 1, 2: 2, 3: -1, 4: -1, 5: 6, 10: 11, 11: 14, 19: 22, 20: -1, 21: 23} {
		got, ok := mapLine(hunks, base)
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("base line %d: head %d, want %d (hunks %v)", base, got, want, hunks)
		}
	}
}

func TestWorkflowCommand(t *testing.T) {
	a := schema.Annotation{Level: "error", File: "a,b:c.go", Line: 7, Title: "perfspy: x, y", Message: "100% more\nand more"}
	want := "::error file=a%2Cb%3Ac.go,line=7,title=perfspy%3A x%2C y::100%25 more%0Aand more"
	if got := workflowCommand(a); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A file name with U+202E: percent-encoded, so that the safe writer
	// leaves the command as it is.
	a.File = "srv/\u202egnp.go"
	if got := workflowCommand(a); !strings.HasPrefix(got, "::error file=srv/%E2%80%AEgnp.go,line=7,") {
		t.Errorf("got %s", got)
	}
}

// TestNetChanges: a line the head left alone is compared with itself
// (moved by the lines above it); a line the head changed is netted with
// the base lines it replaced in the same function, so a 64-byte
// allocation made 16 on the next line is -48 B, one allocation fewer
// nowhere, and an unchanged line is no change.
func TestNetChanges(t *testing.T) {
	// Base: line 5 allocates 64 B (main.h), line 9 2 B (main.ok). Head:
	// base line 5 replaced by head lines 5-6 (a comment, then a 16-byte
	// allocation); so base line 9 is head line 10.
	lm := &lineMaps{m: map[string][]hunk{"a.go": parseHunks("@@ -5 +5,2 @@\n")}}
	before := siteCounts{requests: 100, v: map[siteKey][2]float64{{"a.go", 5, "main.h"}: {100, 6400}, {"a.go", 9, "main.ok"}: {100, 200}}}
	after := siteCounts{requests: 200, v: map[siteKey][2]float64{{"a.go", 6, "main.h"}: {200, 3200}, {"a.go", 10, "main.ok"}: {200, 400}}}
	got := lm.netChanges(before, after)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2: %+v", len(got), got)
	}
	h, ok := got[0], got[1]
	if h.k != (siteKey{"a.go", 6, "main.h"}) || h.v != [2]float64{0, -48} || !strings.Contains(h.from, "head lines 5-6, which replaced base lines 5") {
		t.Errorf("the changed line: %+v", h)
	}
	if ok.k != (siteKey{"a.go", 10, "main.ok"}) || ok.v != [2]float64{0, 0} {
		t.Errorf("the line left alone: %+v", ok)
	}
	if a, is := annotation(h, "allocs", "req", "GET /", true); !is || a.Level != "notice" || !strings.Contains(a.Message, "+0.00 allocs/req (-48 B asked for)") {
		t.Errorf("a decrease is a notice, not an error: %+v %v", a, is)
	}
	if _, is := annotation(ok, "allocs", "req", "GET /", true); is {
		t.Error("an unchanged line is annotated")
	}
	// A removed allocation: its base line is gone, the change lands on
	// the hunk's place in the head.
	lm = &lineMaps{m: map[string][]hunk{"a.go": parseHunks("@@ -5 +4,0 @@\n")}}
	got = lm.netChanges(before, siteCounts{requests: 100, v: map[siteKey][2]float64{{"a.go", 8, "main.ok"}: {100, 200}}})
	if len(got) != 2 || got[0].v != [2]float64{-1, -64} || got[0].k.line != 4 || !strings.Contains(got[0].from, "removed") || got[1].v != [2]float64{0, 0} {
		t.Errorf("a removed line: %+v", got)
	}
}

// TestItemError: an item that could not be measured is named with its
// error in review.md and review.json's reasons, the others are reported,
// and the verdict is incomplete (exit 1), or fail when a gate failed too.
func TestItemError(t *testing.T) {
	ok := &schema.ReviewItem{Kind: "server", Name: "api", Judged: true, Changes: []schema.ReviewChange{{Subject: "GET /", Metric: "allocs/req", Before: 3, After: 3, Verdict: "no change"}}}
	broken := &schema.ReviewItem{Kind: "benchmarks", Name: "./codec .", Error: "probe run -bench: the traced run: exit status 2"}
	r := &Result{Review: schema.Review{Items: []*schema.ReviewItem{ok, broken}}}
	r.verdict()
	md := r.Markdown(CommentLimit)
	if r.Verdict != "incomplete" || !strings.Contains(md, "INCOMPLETE") || !strings.Contains(md, "❌ benchmarks ./codec . could not be measured: probe run -bench: the traced run: exit status 2") || !strings.Contains(md, "| server api, GET / | allocs/req | 3 | 3 |") {
		t.Errorf("verdict %s, review.md:\n%s", r.Verdict, md)
	}
	ok.Changes[0].Failed, ok.Changes[0].Verdict = true, "regression"
	r = &Result{Review: schema.Review{Items: []*schema.ReviewItem{ok, broken}}}
	if r.verdict(); r.Verdict != "fail" {
		t.Errorf("a gate failed beside the error: %s", r.Verdict)
	}
}

// TestRouteOf: a server given by path: is named by its request, whatever
// its mux's pattern; a gRPC server by its method.
func TestRouteOf(t *testing.T) {
	for _, tc := range []struct {
		path, method, want string
	}{
		{"/hello?name=x", "", "GET /hello?name=x"},
		{"", "", "GET /"},
		{"/items", "POST", "POST /items"},
		{"", "echo.Echo/Say", "echo.Echo/Say"},
	} {
		ab, err := probe.NewABConfig("./x", "")
		if err != nil {
			t.Fatal(err)
		}
		ab.Run.Path, ab.Run.Method = tc.path, tc.method
		if got := routeOf(ab); got != tc.want {
			t.Errorf("path %q method %q: %q, want %q", tc.path, tc.method, got, tc.want)
		}
	}
}

// TestTailBills: a review names what the slowest 1% allocate and copy
// differently by their own bills, past half an allocation or a byte per
// request, and nothing otherwise.
func TestTailBills(t *testing.T) {
	var b strings.Builder
	writeTailBills(&b, []schema.ABFunction{
		{Profile: "allocs", Key: "main.other", Delta: 3},
		{Profile: "tail_allocs", Key: "main.fill", Before: 0, After: 10, Delta: 10},
		{Profile: "tail_allocs", Key: "main.noise", Before: 1, After: 1.2, Delta: 0.2},
		{Profile: "tail_copies", Key: "main.rareCopy", Before: 0, After: 65536, Delta: 65536},
		{Profile: "tail_copies", Key: "main.same", Before: 100, After: 100.5, Delta: 0.5},
	})
	got := b.String()
	if !strings.Contains(got, "| `main.fill` | 0 | 10 | +10 |") || strings.Contains(got, "main.noise") || strings.Contains(got, "main.other") ||
		!strings.Contains(got, "(bytes copied per request of that group") || !strings.Contains(got, "| `main.rareCopy` | 0 | 65536 | +65536 |") || strings.Contains(got, "main.same") {
		t.Errorf("tail bills:\n%s", got)
	}
	b.Reset()
	writeTailBills(&b, []schema.ABFunction{{Profile: "tail_allocs", Key: "main.noise", Delta: -0.4}, {Profile: "tail_copies", Key: "main.same", Delta: 0.9}})
	if b.Len() != 0 {
		t.Errorf("nothing moved, yet:\n%s", b.String())
	}
}

// TestWriteFailed: results that cannot be written are an ErrWrite, and
// leave no file behind half written.
func TestWriteFailed(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	os.WriteFile(file, nil, 0o644)
	r := &Result{Dir: filepath.Join(file, "review")}
	if err := r.write(func(string) string { return "" }); !errors.Is(err, ErrWrite) {
		t.Errorf("write into a file's path: %v, want ErrWrite", err)
	}
	r.Dir = dir
	if err := r.write(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("a temporary file left: %s", e.Name())
		}
	}
}
