package review

import (
	"context"
	"strings"
	"testing"
)

const escBase = `package main

var last *point

type point struct{ x, y int }

//go:noinline
func use(p *point) int { return p.x + p.y }

func keep(p *point) int {
	return p.x * p.y
}

func handler(n int) int {
	p := point{n, n}
	s := use(&p)
	return s + keep(&p)
}

func main() { println(handler(3)) }
`

// TestCompilerReasons: the head makes a local struct escape through a
// package variable, and makes keep too big to inline; the compiler's
// diagnostics at both revisions, through the line map, say so on the
// line that allocates, and a line whose diagnostics did not change says
// that.
func TestCompilerReasons(t *testing.T) {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	base := r.commit(map[string]string{"go.mod": "module example.com/esc\n\ngo 1.26\n", "main.go": escBase}, "base")
	big := "\ts := 0\n" + strings.Repeat("\ts += p.x * p.y / (p.x + 1)\n", 12) + "\treturn s\n"
	headSrc := strings.Replace(escBase, "\treturn p.x * p.y\n", big, 1)
	headSrc = strings.Replace(headSrc, "\ts := use(&p)\n", "\ts := use(&p)\n\tlast = &p\n", 1)
	head := r.commit(map[string]string{"main.go": headSrc}, "head")
	hd, bd := diagnoseBoth(t, r, head, base)
	pLine := lineOf(t, headSrc, "p := point{n, n}")
	got := strings.Join(compilerReasons(hd, bd, reasonAt{file: "main.go", line: pLine, baseLines: []int{lineOf(t, escBase, "p := point{n, n}")}}), "; ")
	if !strings.Contains(got, "now moved to heap: p (from last = &p (assign) at main.go:") {
		t.Errorf("the escaping struct's line: %q", got)
	}
	call := lineOf(t, headSrc, "return s + keep(&p)")
	got = strings.Join(compilerReasons(hd, bd, reasonAt{file: "main.go", line: call, baseLines: []int{lineOf(t, escBase, "return s + keep(&p)")}}), "; ")
	if !strings.Contains(got, "keep is no longer inlined (function too complex: cost") {
		t.Errorf("the call no longer inlined: %q", got)
	}
	use := lineOf(t, headSrc, "s := use(&p)")
	got = strings.Join(compilerReasons(hd, bd, reasonAt{file: "main.go", line: use, baseLines: []int{lineOf(t, escBase, "s := use(&p)")}, changed: true}), "; ")
	if !strings.HasPrefix(got, "no change in escape analysis or inlining") {
		t.Errorf("a changed line with no new diagnostic: %q", got)
	}
	got = strings.Join(compilerReasons(hd, bd, reasonAt{file: "main.go", line: use, baseLines: []int{lineOf(t, escBase, "s := use(&p)")}}), "; ")
	if !strings.HasPrefix(got, "no diagnostic of the compiler's explains it") || strings.Contains(got, "asks for") {
		t.Errorf("a line the change left alone: %q", got)
	}
	if out := r.git("worktree", "list"); strings.Count(out, "\n") != 0 {
		t.Errorf("worktrees left:\n%s", out)
	}
}

// diagnoseBoth reads the diagnostics of the repository's root package at
// head and at base.
func diagnoseBoth(t *testing.T, r *repo, head, base string) (hd, bd *diagnostics) {
	t.Helper()
	dirs := map[string]bool{".": false}
	hd, err := diagnose(context.Background(), r.dir, head, dirs)
	if err != nil {
		t.Fatal(err)
	}
	if bd, err = diagnose(context.Background(), r.dir, base, dirs); err != nil {
		t.Fatal(err)
	}
	return hd, bd
}

// TestReasonsNewlineName: a file whose name holds a newline (the compiler
// prints it as it is, over two lines) keeps its compiler reason.
func TestReasonsNewlineName(t *testing.T) {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	const name = "esc\nape.go"
	src := strings.Replace(escBase, "func main() { println(handler(3)) }\n", "", 1)
	files := map[string]string{"go.mod": "module example.com/esc\n\ngo 1.26\n", "main.go": "package main\n\nfunc main() { println(handler(3)) }\n", name: src}
	base := r.commit(files, "base")
	headSrc := strings.Replace(src, "\ts := use(&p)\n", "\ts := use(&p)\n\tlast = &p\n", 1)
	head := r.commit(map[string]string{name: headSrc}, "head")
	hd, bd := diagnoseBoth(t, r, head, base)
	got := strings.Join(compilerReasons(hd, bd, reasonAt{file: name, line: lineOf(t, headSrc, "p := point{n, n}"), baseLines: []int{lineOf(t, src, "p := point{n, n}")}}), "; ")
	if !strings.Contains(got, "now moved to heap: p (from last = &p (assign) at "+name+":") {
		t.Errorf("the escaping struct's line in %q: %q", name, got)
	}
}

// TestReasonsNotConstants: a literal converted to an interface is no
// allocation's reason, and an escape that differs only in a size holds at
// both revisions.
func TestReasonsNotConstants(t *testing.T) {
	head := &diagnostics{at: map[string]map[int][]diag{"a.go": {
		3: {{msg: `"/users" escapes to heap`}, {msg: "make([]byte, 128) escapes to heap"}},
		7: {{msg: `"/users" escapes to heap`}, {msg: "42 escapes to heap"}},
	}}}
	base := &diagnostics{at: map[string]map[int][]diag{"a.go": {3: {{msg: "make([]byte, 64) escapes to heap"}}}}}
	got := strings.Join(compilerReasons(head, base, reasonAt{file: "a.go", line: 3, baseLines: []int{3}, changed: true}), "; ")
	if !strings.HasPrefix(got, "it escapes at both revisions (make([]byte, 128) escapes to heap)") || strings.Contains(got, "users") {
		t.Errorf("a bigger buffer: %q", got)
	}
	got = strings.Join(compilerReasons(head, base, reasonAt{file: "a.go", line: 7, baseLines: []int{7}, changed: true}), "; ")
	if strings.Contains(got, "users") || strings.Contains(got, "42") {
		t.Errorf("constants given as a reason: %q", got)
	}
}
