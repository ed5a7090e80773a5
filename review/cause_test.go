package review

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// causeBase is a benchmark package of four functions, each of which a
// one-line change makes allocate on another line than the changed one.
const causeBase = `package cause

import "testing"

type point struct{ x, y int }

var (
	last    *point
	sinkInt int
	hook    func() int
	sinkS   []int
	words   = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"}
	m       = map[string]int{}
)

//go:noinline
func escape(n int) int {
	p := point{n, n}
	sinkInt = p.x
	return p.y
}

//go:noinline
func collect(n int) []int {
	s := make([]int, 0, n)
	for i := 0; i < n; i++ {
		s = append(s, i)
	}
	return s
}

//go:noinline
func counter(n int) int {
	total := 0
	hook = nil
	for i := 0; i < n; i++ {
		total += i
	}
	return total
}

//go:noinline
func index(keys []string) int {
	clear(m)
	for i, k := range keys {
		m[k] = i
	}
	return len(m)
}

func BenchmarkEscape(b *testing.B) {
	for b.Loop() {
		sinkInt = escape(3)
	}
}

func BenchmarkCollect(b *testing.B) {
	for b.Loop() {
		sinkS = collect(100)
	}
}

func BenchmarkCounter(b *testing.B) {
	for b.Loop() {
		sinkInt = counter(10)
	}
}

func BenchmarkIndex(b *testing.B) {
	for b.Loop() {
		sinkInt = index(words)
	}
}
`

// causeEdits are the head's one-line changes, each with the line it
// makes allocate and what the compiler's reason must say ("" when none
// explains it: the code's own request).
var causeEdits = []struct {
	bench, old, new, alloc, reason string
}{
	{"BenchmarkEscape", "\tsinkInt = p.x\n", "\tlast = &p\n", "p := point{n, n}", "moved to heap: p"},
	{"BenchmarkCollect", "s := make([]int, 0, n)", "s := make([]int, 0)", "s = append(s, i)", ""},
	{"BenchmarkCounter", "\thook = nil\n", "\thook = func() int { return total }\n", "total := 0", "moved to heap: total"},
	{"BenchmarkIndex", "\tclear(m)\n", "\tm := map[string]int{}\n", "m[k] = i", ""},
}

// TestReviewChangedLineIsCause: each one-line change is annotated on the
// changed line, with the line it made allocate named (alloc_line) and a
// reason that explains it, never on the allocating line the head left
// alone.
func TestReviewChangedLineIsCause(t *testing.T) {
	if testing.Short() {
		t.Skip("reviews a benchmark package; skipped with -short")
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	conf := "benchmarks:\n  - package: ./cause\n    bench: .\n    benchtime: 2000x\n"
	base := r.commit(map[string]string{"go.mod": "module example.com/cause\n\ngo 1.26\n", "cause/cause_test.go": causeBase, ".perfspy.yml": conf}, "base")
	headSrc := causeBase
	for _, e := range causeEdits {
		if !strings.Contains(headSrc, e.old) {
			t.Fatalf("%s: %q not in the base", e.bench, e.old)
		}
		headSrc = strings.Replace(headSrc, e.old, e.new, 1)
	}
	head := r.commit(map[string]string{"cause/cause_test.go": headSrc}, "four one-line regressions")
	out := filepath.Join(t.TempDir(), "review")
	code, o, e := runReview(t, r.dir, "-base", base, "-head", head, "-out", out, "-timings=false")
	if code > 1 {
		t.Fatalf("exit %d\n%s%s", code, o, e)
	}
	var res Result
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "review.json"))), &res); err != nil {
		t.Fatal(err)
	}
	for _, ed := range causeEdits {
		changed := lineOf(t, headSrc, strings.TrimSpace(ed.new))
		alloc := lineOf(t, headSrc, ed.alloc)
		found := false
		for _, a := range res.Annotations {
			if a.Subject != ed.bench+"-2" && !strings.HasPrefix(a.Subject, ed.bench+"-") || !strings.HasPrefix(a.Metric, "allocs/") {
				continue
			}
			t.Logf("%s: %s:%d (alloc line %d): %s", ed.bench, a.File, a.Line, a.AllocLine, a.Message)
			if a.Line == alloc {
				t.Errorf("%s: annotated on line %d, which the head left alone", ed.bench, alloc)
			}
			if a.Line != changed {
				continue
			}
			found = true
			// alloc_line when only the line left alone allocates; named
			// beside the changed line's own allocation otherwise.
			if a.AllocLine != alloc && (a.AllocLine != 0 || !strings.Contains(a.Message, fmt.Sprintf("with cause/cause_test.go:%d,", alloc))) {
				t.Errorf("%s: alloc_line %d, want %d named", ed.bench, a.AllocLine, alloc)
			}
			reasons := strings.Join(a.Compiler, "; ")
			if ed.reason != "" && !strings.Contains(reasons, ed.reason) {
				t.Errorf("%s: reasons %q, want %q", ed.bench, reasons, ed.reason)
			}
			if strings.Contains(reasons, "escapes to heap") && strings.Contains(reasons, "\"") {
				t.Errorf("%s: a constant given as a reason: %q", ed.bench, reasons)
			}
		}
		if !found {
			t.Errorf("%s: no allocation annotation on the changed line %d", ed.bench, changed)
		}
	}
}
