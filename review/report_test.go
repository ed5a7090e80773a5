package review

import (
	"fmt"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/schema"
)

// bigResult is a review with n changed routes, each with functions and
// annotated lines.
func bigResult(n int) *Result {
	gate := 0.0
	it := &Item{Kind: "server", Name: "api", Route: "the request mix"}
	r := &Result{Review: schema.Review{Base: map[string]string{"rev": "main", "commit": "aaaaaaaaaaaaaaaa"}, Head: map[string]string{"rev": "HEAD", "commit": "bbbbbbbbbbbbbbbb"},
		Verdict: "fail", Config: ".perfspy.yml", Items: []*Item{it}}}
	for i := range n {
		route := fmt.Sprintf("GET /route/%d|`*[x]", i)
		it.Changes = append(it.Changes, Change{Subject: route, Metric: "allocs/req", Before: 10, After: 11, Delta: 1, DeltaPct: 10, Verdict: "regression", Gate: &gate, Failed: true, Profile: route + " allocs"})
		for j := range 5 {
			it.Functions = append(it.Functions, probe.ABFunction{Profile: route + " allocs", Key: fmt.Sprintf("example.com/app/pkg%d.Func%d", i, j), Before: 1, After: 2, Delta: 1, Sample: "alloc_objects"})
		}
		r.Annotations = append(r.Annotations, Annotation{Level: "error", File: "app/h.go", Line: i + 1, Func: "main.h", Item: "api", Subject: route, Metric: "allocs/req", Delta: 1, Message: "+1.00 allocs/req (+64 B) in " + route})
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
	a := Annotation{Level: "error", File: "a,b:c.go", Line: 7, Title: "perfspy: x, y", Message: "100% more\nand more"}
	want := "::error file=a%2Cb%3Ac.go,line=7,title=perfspy%3A x%2C y::100%25 more%0Aand more"
	if got := workflowCommand(a); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
