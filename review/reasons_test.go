package review

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kindsBase is a package whose head (kindsHead) changes each function in
// one of the ways a review must word rightly.
const kindsBase = `package main

import (
	"context"
	"strconv"
)

type key struct{ a, b string }

func newKey(a, b string) *key {
	return &key{a, b}
}

func useKey(a, b string) int {
	k := newKey(a, b)
	return len(k.a) + len(k.b)
}

func sum(xs []int) (s int) {
	for _, x := range xs {
		s += x
	}
	return s
}

func label(x string) string {
	return x
}

type ctxKey struct{}

func withN(ctx context.Context, n int) context.Context {
	return ctx
}

//go:noinline
func with(fs []string, f string) []string { return append(fs, f) }

func fields(fs []string) []string {
	fs = with(fs, "a")
	return fs
}

func format(buf []byte, x int) []byte {
	return strconv.AppendInt(buf[:0], int64(x), 10)
}

func main() {
	println(useKey("a", "b"), sum([]int{1}), label("x"), withN(context.Background(), 300) != nil, len(fields(nil)), len(format(nil, 3)))
}
`

func kindsHead() string {
	s := kindsBase
	big := "\tif a == \"\" {\n" + strings.Repeat("\t\ta, b = b+a, a+b\n", 12) + "\t}\n\treturn &key{a, b}\n"
	s = strings.Replace(s, "\treturn &key{a, b}\n", big, 1)
	s = strings.Replace(s, "\t\ts += x\n", "\t\tdefer func() { s += x }()\n", 1)
	s = strings.Replace(s, "\treturn x\n", "\treturn \"gte=\" + x + \",lte=130\"\n", 1)
	s = strings.Replace(s, "\treturn ctx\n", "\treturn context.WithValue(ctx, ctxKey{}, n)\n", 1)
	s = strings.Replace(s, "\tfs = with(fs, \"a\")\n", "\tfs = with(with(fs, \"a\"), \"b\")\n", 1)
	return strings.Replace(s, "strconv.AppendInt(buf[:0], int64(x), 10)", "strconv.AppendInt(nil, int64(x), 10)", 1)
}

// TestReasonsKinds: the compiler's reasons, read from -m=2 at both
// revisions, for a helper grown past the inliner's budget, a defer added
// in a loop, a string joined from a literal and a variable, a zero-size
// key beside a boxed int, a second call on a line, and a buffer no longer
// passed: each names what moved, never a constant or a zero value.
func TestReasonsKinds(t *testing.T) {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	base := r.commit(map[string]string{"go.mod": "module example.com/kinds\n\ngo 1.26\n", "main.go": kindsBase}, "base")
	headSrc := kindsHead()
	head := r.commit(map[string]string{"main.go": headSrc}, "head")
	hd, bd := diagnoseBoth(t, r, head, base)
	at := func(find, baseFind string, changed bool, fn string, stack ...string) string {
		var bl []int
		if baseFind != "" {
			bl = []int{lineOf(t, kindsBase, baseFind)}
		}
		return strings.Join(compilerReasons(hd, bd, reasonAt{file: "main.go", line: lineOf(t, headSrc, find), baseLines: bl, changed: changed, fn: fn, stack: stack}), "; ")
	}
	for _, tc := range []struct {
		name, got string
		want      []string
		not       []string
	}{
		{"a helper grown past the inliner's budget", at("return &key{a, b}", "return &key{a, b}", false, "example.com/kinds.newKey"),
			[]string{"newKey is no longer inlined (function too complex: cost", "exceeds budget 80): what it allocates escapes to its callers now"}, []string{"no diagnostic"}},
		{"a defer in a loop", at("defer func() { s += x }()", "", true, "example.com/kinds.sum"),
			[]string{"a defer in a loop: its closure escapes to heap, one per iteration"}, []string{"no change", "spill"}},
		{"a literal joined to a variable", at(`return "gte=" + x`, "return x", true, "example.com/kinds.label"),
			[]string{`now "gte=" + x + ",lte=130" escapes to heap`}, nil},
		{"a zero-size key beside a boxed int", at("context.WithValue(ctx, ctxKey{}, n)", "return ctx", true, "example.com/kinds.withN"),
			[]string{"now n escapes to heap"}, []string{"ctxKey{} escapes"}},
		{"a second call", at(`fs = with(with(fs, "a"), "b")`, `fs = with(fs, "a")`, true, "example.com/kinds.fields", "example.com/kinds.fields (main.go:40)", "example.com/kinds.with (main.go:36)"),
			[]string{"a new call on this line (with)"}, []string{"asks for another allocation"}},
		{"a buffer no longer passed", at("strconv.AppendInt(nil", "strconv.AppendInt(buf[:0]", true, "example.com/kinds.format"),
			[]string{"what it passes changed", "`return strconv.AppendInt(nil, int64(x), 10)` was `return strconv.AppendInt(buf[:0], int64(x), 10)`"}, []string{"new make"}},
	} {
		t.Logf("%s: %s", tc.name, tc.got)
		for _, w := range tc.want {
			if !strings.Contains(tc.got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, tc.got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(tc.got, n) {
				t.Errorf("%s: %q says %q", tc.name, tc.got, n)
			}
		}
	}
}

// TestReasonsWording: an improvement is worded as one, the inlining of
// functions off the allocation's stack is counted, not listed, and a
// changed line whose diagnostics held names what it asks for.
func TestReasonsWording(t *testing.T) {
	d := func(msgs ...string) []diag {
		var out []diag
		for _, m := range msgs {
			out = append(out, diag{msg: m})
		}
		return out
	}
	head := &diagnostics{at: map[string]map[int][]diag{"a.go": {
		3: d("make([]byte, 64) escapes to heap"),
		5: d("inlining call to a", "inlining call to b", "inlining call to c", "inlining call to pkg.(*T).Grow", "x escapes to heap"),
		9: d(),
	}}}
	base := &diagnostics{at: map[string]map[int][]diag{"a.go": {
		3: d("make([]byte, 64) escapes to heap"),
		5: d("x escapes to heap"),
	}}}
	for _, tc := range []struct {
		name string
		at   reasonAt
		want string
	}{
		{"less asked for", reasonAt{file: "a.go", line: 3, baseLines: []int{3}, changed: true, fell: true}, "it escapes at both revisions (make([]byte, 64) escapes to heap): the code asks for less"},
		{"more asked for", reasonAt{file: "a.go", line: 3, baseLines: []int{3}, changed: true}, "it escapes at both revisions (make([]byte, 64) escapes to heap): the code asks for another allocation"},
		{"an allocation taken out", reasonAt{file: "a.go", line: 9, baseLines: []int{9}, changed: true, fell: true}, "no change in escape analysis or inlining at this line: the code no longer asks for the allocation"},
		{"inlining on the stack", reasonAt{file: "a.go", line: 5, baseLines: []int{5}, changed: true, stack: []string{"example.com/m.F (a.go:5)", "example.com/m/pkg.(*T).Grow (t.go:9)"}},
			"pkg.(*T).Grow is now inlined; 3 other functions' inlining changed at this line, none on the allocation's stack"},
		{"inlining off the stack", reasonAt{file: "a.go", line: 5, baseLines: []int{5}, changed: true}, "a is now inlined; b is now inlined; 2 other functions' inlining changed"},
	} {
		if got := strings.Join(compilerReasons(head, base, tc.at), "; "); got != tc.want && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestNewCalls: a call is new when the head's hunk makes it more often
// than the base lines did; the callee on the allocation's stack is named
// alone; comments and keywords are no calls.
func TestNewCalls(t *testing.T) {
	for _, tc := range []struct {
		head, base []string
		stack      []string
		want       string
	}{
		{[]string{`m.Match(r, &a) // once`, `var b M`, `return m.Match(r, &b)`}, []string{`return m.Match(r, &a)`}, nil, "m.Match"},
		{[]string{`l.WithField("a", 1).WithField("b", 2).Info("x")`}, []string{`l.WithField("a", 1).Info("x")`}, nil, "WithField"},
		{[]string{`x := f(g(1), h(2)) // f(3)`}, []string{`x := f(1)`}, []string{"example.com/m.F (a.go:1)", "example.com/m.h (a.go:9)"}, "h"},
		{[]string{`cp := append(Params(nil), ps...)`}, []string{`return ps.ByName("id")`}, []string{"example.com/m.F (a.go:1)", "runtime.growslice (slice.go:1)"}, "append"},
		{[]string{`if x := f(1); x > 0 {`}, []string{`if f(1) > 0 {`}, nil, ""},
	} {
		if got := strings.Join(newCalls(tc.head, tc.base, tc.stack), ", "); got != tc.want {
			t.Errorf("%q over %q: %q, want %q", tc.head, tc.base, got, tc.want)
		}
	}
}

// TestSignatureDefines: a named result or a parameter is defined on the
// signature's line, so a changed line below whose closure captures it is
// the cause of its move to the heap there.
func TestSignatureDefines(t *testing.T) {
	fis := fileIdents("package p\n\nfunc sum(xs []int) (s int) {\n\tfor _, x := range xs {\n\t\tdefer func() { s += x }()\n\t}\n\treturn s\n}\n")
	if len(fis) != 1 || !fis[0].defs[3]["s"] || !fis[0].defs[3]["xs"] || !fis[0].uses[5]["s"] {
		t.Errorf("the signature's names: %+v", fis)
	}
}

// TestNoAllocation: constants and zero values never allocate; an empty
// map literal, a named map type's, and a string joined from a variable
// do.
func TestNoAllocation(t *testing.T) {
	values := map[string]bool{"ctxKey": true, "row": true}
	for msg, want := range map[string]bool{
		`"/users" escapes to heap`:                true,
		`"a" + "b" escapes to heap`:               true,
		`"gte=" + x + ",lte=130" escapes to heap`: false,
		`42 escapes to heap`:                      true,
		`ctxKey{} escapes to heap`:                true,
		`context.backgroundCtx{} escapes to heap`: true,
		`struct{}{} escapes to heap`:              true,
		`map[string]int{} escapes to heap`:        false,
		`http.Header{} escapes to heap`:           false,
		`Labels{} escapes to heap`:                false,
		`row{...} escapes to heap`:                false,
		`&ctxKey{} escapes to heap`:               false,
		`func literal escapes to heap`:            false,
		`... argument escapes to heap`:            false,
		`make([]byte, 64) escapes to heap`:        false,
		`moved to heap: p`:                        false,
	} {
		if got := noAllocation(msg, values); got != want {
			t.Errorf("%s: no allocation %v, want %v", msg, got, want)
		}
	}
}

// TestReadSourcesRegular: a .go name that is a link to a device, or a
// FIFO, is not read (it would never end, or wait for a writer); the
// regular files beside it are.
func TestReadSourcesRegular(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\ntype key struct{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.go")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.go"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &diagnostics{}
	done := make(chan struct{})
	go func() { readSources(dir, "p", d); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("readSources hung on a device or a FIFO")
	}
	if d.source("p/a.go", 3) != "type key struct{}" || !d.values["key"] || len(d.src) != 1 {
		t.Errorf("sources %v, values %v: want a.go alone", d.src, d.values)
	}
}
