package review

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

const goModBase = `module example.com/svc

go 1.26

require (
	github.com/goccy/go-json v0.10.5 // indirect
	example.com/dep v1.0.0
)

require golang.org/x/sys v0.50.0

replace example.com/dep v1.0.0 => ../dep1
`

const goModHead = `module example.com/svc

go 1.27.3

toolchain go1.27.3

require (
	github.com/goccy/go-json v0.12.0 // indirect
	example.com/dep v1.1.0
)

require golang.org/x/sys v0.50.0

replace example.com/dep v1.1.0 => ../dep2
`

// TestGoModChanges: each go.mod line that differs, with its line in the
// head, from blocks and single lines.
func TestGoModChanges(t *testing.T) {
	got := goModChanges("go.mod", parseGoMod(goModBase), parseGoMod(goModHead))
	want := []schema.GoModChange{
		{File: "go.mod", Line: 3, Kind: "go", Path: "go", Before: "1.26", After: "1.27.3"},
		{File: "go.mod", Line: 14, Kind: "replace", Path: "example.com/dep", Before: "v1.0.0 => ../dep1", After: "v1.1.0 => ../dep2"},
		{File: "go.mod", Line: 9, Kind: "require", Path: "example.com/dep", Before: "v1.0.0", After: "v1.1.0"},
		{File: "go.mod", Line: 8, Kind: "require", Path: "github.com/goccy/go-json", Before: "v0.10.5", After: "v0.12.0"},
		{File: "go.mod", Line: 5, Kind: "toolchain", Path: "toolchain", Before: "", After: "go1.27.3"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n got %+v\nwant %+v", got, want)
	}
}

// TestModuleCause: an unchanged line whose stack goes into a bumped
// module is that module's; into the standard library, the toolchain's;
// a changed line, or one whose stack is the repository's own, is not
// moved.
func TestModuleCause(t *testing.T) {
	changes := goModChanges("go.mod", parseGoMod(goModBase), parseGoMod(goModHead))
	lc := func(changed bool, below ...string) lineChange {
		return lineChange{k: siteKey{"codec/codec.go", 9, "example.com/svc/codec.Decode"}, changed: changed,
			path: append([]string{"example.com/svc/codec.BenchmarkDecode (codec/codec_test.go:7)", "example.com/svc/codec.Decode (codec/codec.go:9)"}, below...)}
	}
	for _, tc := range []struct {
		name  string
		lc    lineChange
		path  string
		frame string
	}{
		{"a bumped module", lc(false, "github.com/goccy/go-json.Unmarshal (json.go:300)", "github.com/goccy/go-json/internal/decoder.(*RuntimeContext).makeString (decoder.go:20)", "runtime.growslice (slice.go:1)"),
			"github.com/goccy/go-json", "github.com/goccy/go-json/internal/decoder.(*RuntimeContext).makeString (decoder.go:20)"},
		{"the standard library", lc(false, "encoding/json.Unmarshal (decode.go:10)", "runtime.makeslice (slice.go:1)"), "toolchain", "encoding/json.Unmarshal (decode.go:10)"},
		{"a module required and replaced anew", lc(false, "example.com/dep.Encode (dep.go:3)"), "example.com/dep", "example.com/dep.Encode (dep.go:3)"},
		{"a module that did not change", lc(false, "golang.org/x/sys/unix.Read (syscall.go:3)"), "", ""},
		{"the repository's own line", lc(false), "", ""},
		{"a changed line", lc(true, "github.com/goccy/go-json.Unmarshal (json.go:300)"), "", ""},
	} {
		c, frame, ok := moduleCause(tc.lc, changes, true)
		if ok != (tc.path != "") || c.Path != tc.path || frame != tc.frame {
			t.Errorf("%s: %+v %q %v; want %q at %q", tc.name, c, frame, ok, tc.path, tc.frame)
		}
	}
}

// TestFuncPackage: the package path of a profile's function names.
func TestFuncPackage(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/goccy/go-json/internal/decoder.(*RuntimeContext).makeString": "github.com/goccy/go-json/internal/decoder",
		"encoding/json.(*decodeState).object":                                    "encoding/json",
		"main.user":                                                              "main",
		"example.com/dep.Encode[...]":                                            "example.com/dep",
	} {
		if got := funcPackage(fn); got != want {
			t.Errorf("funcPackage(%q) = %q, want %q", fn, got, want)
		}
	}
	if profkey.StdPackage("main") || !profkey.StdPackage("encoding/json") || profkey.StdPackage("example.com/x") {
		t.Error("profkey.StdPackage")
	}
}

// depSource is example.com/dep at a version: Encode makes n allocations
// of 48 B in depWork.
func depSource(n int) string {
	return fmt.Sprintf(`package dep

var sink [4]*[48]byte

//go:noinline
func depWork() {
	for i := 0; i < %d; i++ {
		sink[i] = new([48]byte)
	}
}

// Encode is the module's API.
//
//go:noinline
func Encode(s string) []byte {
	depWork()
	return []byte(s)
}
`, n)
}

const bumpServer = `package main

import (
	"flag"
	"log"
	"net"
	"net/http"

	"example.com/dep"
)

func user(w http.ResponseWriter, r *http.Request) {
	w.Write(dep.Encode(r.PathValue("id")))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("GET /users/{id}", user)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(ln, nil))
}
`

const bumpBench = `package codec

import (
	"testing"

	"example.com/dep"
)

var Sink []byte

func BenchmarkEncode(b *testing.B) {
	for b.Loop() {
		Sink = dep.Encode("42")
	}
}
`

const bumpConfig = `servers:
  - name: api
    target: ./server
    path: /users/7
benchmarks:
  - package: ./codec
    bench: 'BenchmarkEncode$'
    benchtime: 2000x
gates:
  allocs/req: 0%
  allocs/op: 0%
`

// TestReviewModuleBump: a head that only bumps a module (example.com/dep
// v1.0.0 -> v1.1.0, each version a folder of the repository that a
// replace names; its Encode makes one allocation more) is annotated on
// go.mod's require line, naming the module, both versions and the
// module's function, for the server and the benchmark; no line of the
// repository's code is annotated; review.json and review.md name the
// change.
func TestReviewModuleBump(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server and a benchmark at two revisions; skipped with -short")
	}
	// Both versions live in the repository (a replace may only name a
	// folder inside the revision's tree); the head changes go.mod alone.
	files := map[string]string{"server/main.go": bumpServer, "codec/codec_test.go": bumpBench, ".perfspy.yml": bumpConfig}
	for v, n := range map[string]int{"v1.0.0": 1, "v1.1.0": 2} {
		files["third_party/dep-"+v+"/go.mod"] = "module example.com/dep\n\ngo 1.26\n"
		files["third_party/dep-"+v+"/dep.go"] = depSource(n)
	}
	goMod := func(v string) string {
		return fmt.Sprintf("module example.com/bumped\n\ngo 1.26\n\nrequire example.com/dep %s\n\nreplace example.com/dep %s => ./third_party/dep-%s\n", v, v, v)
	}
	files["go.mod"] = goMod("v1.0.0")
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	base := r.commit(files, "base")
	head := r.commit(map[string]string{"go.mod": goMod("v1.1.0")}, "bump example.com/dep to v1.1.0")
	out := filepath.Join(t.TempDir(), "review")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"-q", "-repo", r.dir, "-base", base, "-head", head, "-out", out, "-timings=false", "-warmup", "200ms", "-duration", "700ms"}, &o, &e)
	if code != cmdmain.Failed {
		t.Fatalf("exit %d, want 1 (the 0%% gates)\n%s%s", code, o.String(), e.String())
	}
	var res Result
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "review.json"))), &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("modules %+v", res.Modules)
	require := slices.IndexFunc(res.Modules, func(c schema.GoModChange) bool { return c.Kind == "require" && c.Path == "example.com/dep" })
	if require < 0 || res.Modules[require].Line != 5 || res.Modules[require].Before != "v1.0.0" || res.Modules[require].After != "v1.1.0" {
		t.Fatalf("modules %+v: want example.com/dep v1.0.0 -> v1.1.0 on line 5", res.Modules)
	}
	on := map[string]int{}
	for _, a := range res.Annotations {
		t.Logf("%s:%d %s %s: %s", a.File, a.Line, a.Level, a.Title, a.Message)
		on[a.File]++
		if a.File != "go.mod" {
			t.Errorf("an annotation on %s:%d, a line the head did not change: %s", a.File, a.Line, a.Message)
			continue
		}
		if a.Line != 5 || !strings.Contains(a.Message, "example.com/dep v1.0.0 → v1.1.0") || !strings.Contains(a.Message, "example.com/dep.depWork") || a.Delta < 0.99 || a.Delta > 1.01 {
			t.Errorf("go.mod annotation %+v: want line 5, the module's versions, example.com/dep.depWork, +1", a)
		}
		if len(a.Compiler) != 0 {
			t.Errorf("go.mod annotation with the compiler's reasons %q", a.Compiler)
		}
	}
	if on["go.mod"] != 2 {
		t.Errorf("%d annotations on go.mod, want the server's and the benchmark's", on["go.mod"])
	}
	md := readFile(t, filepath.Join(out, "review.md"))
	if !strings.Contains(md, "**go.mod changed**") || !strings.Contains(md, "example.com/dep v1.0.0 → v1.1.0") {
		t.Errorf("review.md does not name the bump:\n%s", md)
	}
}

const jsonBench = `package codec

import (
	"encoding/json"
	"testing"
)

type record struct {
	ID    int               ` + "`json:\"id\"`" + `
	Name  string            ` + "`json:\"name\"`" + `
	Tags  []string          ` + "`json:\"tags\"`" + `
	Attrs map[string]string ` + "`json:\"attrs\"`" + `
}

var Sink record

func BenchmarkDecode(b *testing.B) {
	in := []byte(` + "`" + `{"id":7,"name":"x","tags":["a","b"],"attrs":{"k":"v"}}` + "`" + `)
	for b.Loop() {
		var r record
		if err := json.Unmarshal(in, &r); err != nil {
			b.Fatal(err)
		}
		Sink = r
	}
}
`

// TestReviewToolchainBump: a head that only moves go.mod's go line from
// 1.26 to 1.27.3 is built by Go 1.27.3 (GOTOOLCHAIN=auto, as the go
// command does), the base by Go 1.26; review.json names each revision's
// Go, and encoding/json's change is annotated on the go line, not on the
// benchmark's unchanged line.
func TestReviewToolchainBump(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a benchmark with two Go releases; skipped with -short")
	}
	if os.Getenv("GOTOOLCHAIN") != "" {
		t.Skip("GOTOOLCHAIN is set: the review builds both revisions with it")
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	conf := "benchmarks:\n  - package: ./codec\n    bench: 'BenchmarkDecode$'\n    benchtime: 2000x\n"
	base := r.commit(map[string]string{"go.mod": "module example.com/tc\n\ngo 1.26\n", "codec/codec_test.go": jsonBench, ".perfspy.yml": conf}, "base")
	head := r.commit(map[string]string{"go.mod": "module example.com/tc\n\ngo 1.27.3\n"}, "go 1.27.3")
	out := filepath.Join(t.TempDir(), "review")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"-q", "-repo", r.dir, "-base", base, "-head", head, "-out", out, "-timings=false"}, &o, &e)
	if code != cmdmain.OK && code != cmdmain.Failed {
		t.Fatalf("exit %d\n%s%s", code, o.String(), e.String())
	}
	var res Result
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "review.json"))), &res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Base["go"], "go1.26") || res.Head["go"] != "go1.27.3" {
		t.Errorf("base built by %q, head by %q; want go1.26 and go1.27.3", res.Base["go"], res.Head["go"])
	}
	if len(res.Modules) != 1 || res.Modules[0].Kind != "go" || res.Modules[0].Line != 3 || res.Modules[0].After != "1.27.3" {
		t.Errorf("modules %+v: want the go line, 3, 1.26 → 1.27.3", res.Modules)
	}
	var onGo int
	for _, a := range res.Annotations {
		t.Logf("%s:%d %s: %s", a.File, a.Line, a.Title, a.Message)
		if a.File != "go.mod" || a.Line != 3 {
			t.Errorf("an annotation on %s:%d, a line the head did not change", a.File, a.Line)
			continue
		}
		onGo++
		if !strings.Contains(a.Message, "go 1.26 → 1.27.3") || !strings.Contains(a.Message, ", at encoding/json") {
			t.Errorf("go line's annotation %q: want the two Go versions and encoding/json's site", a.Message)
		}
	}
	if onGo == 0 {
		t.Errorf("no annotation on the go line; changes %+v", res.Items[0].Changes)
	}
	if md := readFile(t, filepath.Join(out, "review.md")); !strings.Contains(md, "go1.27.3") {
		t.Errorf("review.md does not name the head's Go:\n%s", md)
	}
}

// TestModuleCauseOwnLine: a line whose own allocation moved (no frame
// below it) is the one module's a head that changed no Go file bumped;
// with Go files changed too, or two modules bumped, it is not moved.
func TestModuleCauseOwnLine(t *testing.T) {
	one := goModChanges("go.mod", parseGoMod("require example.com/dep v1.0.0\nreplace example.com/dep => ../d1\n"), parseGoMod("require example.com/dep v1.1.0\nreplace example.com/dep => ../d2\n"))
	two := goModChanges("go.mod", parseGoMod("require (\n\ta.example/x v1.0.0\n\tb.example/y v1.0.0\n)\n"), parseGoMod("require (\n\ta.example/x v1.0.1\n\tb.example/y v1.0.1\n)\n"))
	lc := lineChange{k: siteKey{"codec/codec.go", 28, "example.com/gj/codec.Encode"},
		path: []string{"example.com/gj/codec.BenchmarkEncode (codec/codec_test.go:24)", "example.com/gj/codec.Encode (codec/codec.go:28)"}}
	if c, frame, ok := moduleCause(lc, one, false); !ok || c.Kind != "require" || c.Line != 1 || frame != lc.path[1] {
		t.Errorf("one module, no Go file changed: %+v %q %v; want its require line at the line itself", c, frame, ok)
	}
	if _, _, ok := moduleCause(lc, one, true); ok {
		t.Error("a Go file changed too: moved to go.mod")
	}
	if _, _, ok := moduleCause(lc, two, false); ok {
		t.Error("two modules bumped: moved to one of them")
	}
}

// TestBisectHint: a pull request of several commits whose exact count
// regressed is offered the probe bisect command that names the commit;
// one of a single commit is not.
func TestBisectHint(t *testing.T) {
	r := &Result{cfg: &Config{Servers: []Server{{Name: "api", Target: "./server", Path: "/users/7"}}}}
	r.Base = map[string]string{"commit": "1111111111111111"}
	r.Head = map[string]string{"commit": "2222222222222222", "commits": "5"}
	r.Items = []*schema.ReviewItem{{Kind: "server", Name: "api", Changes: []schema.ReviewChange{
		{Subject: "GET /users/7", Metric: "allocs/req", Verdict: "regression"},
		{Subject: "GET /users/7", Metric: "p99-us", Verdict: "regression"},
	}}}
	md := r.Markdown(60000)
	want := "probe bisect -good " + short("1111111111111111") + " -bad " + short("2222222222222222") + " -metric allocs/req -path /users/7 ./server"
	if !strings.Contains(md, want) || strings.Count(md, "probe bisect") != 1 {
		t.Errorf("review.md does not offer %q once:\n%s", want, md)
	}
	r.Head["commits"] = "1"
	if md := r.Markdown(60000); strings.Contains(md, "probe bisect") {
		t.Errorf("one commit: bisect offered:\n%s", md)
	}
}

// TestBisectHintQuoted: the hint's values come from the head's
// .perfspy.yml: pasted into a shell, a value made of shell syntax runs
// nothing, and reaches probe as it was written.
func TestBisectHintQuoted(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to paste the hint into")
	}
	dir := t.TempDir()
	evil := "$(touch " + filepath.Join(dir, "a") + ")`touch " + filepath.Join(dir, "b") + "`;touch " + filepath.Join(dir, "c") + " '"
	r := &Result{cfg: &Config{
		Servers:    []Server{{Name: "api", Target: "./server" + evil, Path: "/users/7" + evil}},
		Benchmarks: []Benchmark{{Package: "./codec" + evil, Bench: "." + evil, BenchTime: "1x" + evil}},
	}}
	r.Base = map[string]string{"commit": "1111111111111111"}
	r.Head = map[string]string{"commit": "2222222222222222", "commits": "5"}
	r.Items = []*schema.ReviewItem{
		{Kind: "server", Name: "api", Changes: []schema.ReviewChange{{Subject: "GET /users/7", Metric: "allocs/req", Verdict: "regression"}}},
		{Kind: "benchmarks", Name: "./codec" + evil + " ." + evil, Changes: []schema.ReviewChange{{Subject: "BenchmarkX", Metric: "allocs/op", Verdict: "regression"}}},
	}
	md := r.Markdown(60000)
	cmds := regexp.MustCompile("(`+) ?(probe bisect .*?) ?`+ names the commit").FindAllStringSubmatch(md, -1)
	if len(cmds) != 2 {
		t.Fatalf("want two hints in:\n%s", md)
	}
	for _, c := range cmds {
		// probe, a function that prints its words one a line.
		out, err := exec.Command("sh", "-c", "probe() { for w in \"$@\"; do printf '%s\\n' \"$w\"; done; }; "+c[2]).Output()
		if err != nil {
			t.Fatalf("%s: %v", c[2], err)
		}
		if !strings.Contains(string(out), evil+"\n") {
			t.Errorf("%s: the words read back %q lack the value as written", c[2], out)
		}
	}
	for _, f := range []string{"a", "b", "c"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("pasting the hint ran touch %s", f)
		}
	}
}

// TestGoModGodebug: a godebug setting that changed (a line, or a block)
// is a change of go.mod, named in review.md, and the standard library's
// functions are its when nothing else in go.mod changed.
func TestGoModGodebug(t *testing.T) {
	b := parseGoMod("module m\n\ngo 1.26\n\ngodebug (\n\tasynctimerchan=1\n\tpanicnil=0\n)\n")
	h := parseGoMod("module m\n\ngo 1.26\n\ngodebug (\n\tasynctimerchan=0\n\tpanicnil=0\n)\n\ngodebug x509sha1=1\n")
	cs := goModChanges("go.mod", b, h)
	want := []schema.GoModChange{
		{File: "go.mod", Line: 6, Kind: "godebug", Path: "asynctimerchan", Before: "1", After: "0"},
		{File: "go.mod", Line: 10, Kind: "godebug", Path: "x509sha1", Before: "", After: "1"},
	}
	if !slices.Equal(cs, want) {
		t.Fatalf("changes %+v, want %+v", cs, want)
	}
	if c, ok := moduleOf("time.NewTimer", cs); !ok || c.Path != "asynctimerchan" {
		t.Errorf("time.NewTimer: %+v %v, want the godebug line's", c, ok)
	}
	if _, ok := moduleOf("example.com/m/pkg.F", cs); ok {
		t.Error("a module's function charged to a godebug setting")
	}
	r := &Result{}
	r.Modules = cs
	if md := r.moduleSection(); !strings.Contains(md, "godebug asynctimerchan 1 → 0") || !strings.Contains(md, "godebug x509sha1 (none) → 1") {
		t.Errorf("review.md's go.mod section does not name the godebug changes:\n%s", md)
	}
}

// TestGoModChangesBounded: a go.mod whose 5,000 require lines changed
// lists 200 changes, the go line first, and says how many more there were.
func TestGoModChangesBounded(t *testing.T) {
	var before, after strings.Builder
	before.WriteString("module m\n\ngo 1.26\n\nrequire (\n")
	after.WriteString("module m\n\ngo 1.27\n\nrequire (\n")
	for i := range 5000 {
		fmt.Fprintf(&before, "\tm%d.example/x v1.0.0\n", i)
		fmt.Fprintf(&after, "\tm%d.example/x v1.0.1\n", i)
	}
	cs, omitted := boundChanges(goModChanges("go.mod", parseGoMod(before.String()+")\n"), parseGoMod(after.String()+")\n")))
	if len(cs) != maxModuleChanges || omitted != 5001-maxModuleChanges || cs[0].Kind != "go" {
		t.Fatalf("%d changes listed, %d omitted, first %+v: want %d, %d, the go line", len(cs), omitted, cs[0], maxModuleChanges, 5001-maxModuleChanges)
	}
	r := &Result{}
	r.Modules, r.ModulesOmitted = cs, omitted
	if md := r.moduleSection(); !strings.Contains(md, fmt.Sprintf("%d more lines of go.mod changed", omitted)) || strings.Count(md, "\n| ") != maxModuleChanges+1 {
		t.Errorf("review.md's go.mod section: %d rows, want %d and the count of the rest", strings.Count(md, "\n| ")-1, maxModuleChanges)
	}
}
