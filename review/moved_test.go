package review

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/schema"
)

// sampleOf is a sample of a stack path ("fn (file:line)", outermost
// first): main's frames in the repository /repo, the others' files in
// the module cache.
func sampleOf(path []string) *profile.Sample {
	s := &profile.Sample{}
	for _, f := range slices.Backward(path) {
		fn, pos, _ := strings.Cut(strings.TrimSuffix(f, ")"), " (")
		file, line, _ := strings.Cut(pos, ":")
		n, _ := strconv.Atoi(line)
		dir := "/mod/"
		if strings.HasPrefix(fn, "main.") {
			dir = "/repo/"
		}
		s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: fn, Filename: dir + file}, Line: int64(n)}}})
	}
	return s
}

// TestMovedStack: a line the head left alone calls into a module along
// two chains: the heavier did not move (5 a request at both versions),
// the lighter grew from 0 to 2 a request. The module's change is named
// at the chain that moved, with its line in each version, not at the
// heaviest.
func TestMovedStack(t *testing.T) {
	k := siteKey{"main.go", 20, "main.serve"}
	own := "main.serve (main.go:20)"
	heavyB := []string{own, "github.com/go-chi/chi/v5.(*Mux).ServeHTTP (mux.go:90)", "github.com/go-chi/chi/v5.(*Mux).routeHTTP (mux.go:470)", "net/http.(*Request).SetPathValue (request.go:1500)"}
	heavyA := []string{own, "github.com/go-chi/chi/v5.(*Mux).ServeHTTP (mux.go:91)", "github.com/go-chi/chi/v5.(*Mux).routeHTTP (mux.go:473)", "net/http.(*Request).SetPathValue (request.go:1500)"}
	moved := []string{own, "github.com/go-chi/chi/v5.(*Mux).ServeHTTP (mux.go:91)", "github.com/go-chi/chi/v5.(*Mux).routeHTTP (mux.go:475)", "github.com/go-chi/chi/v5.(*Context).RoutePattern (context.go:120)", "strings.Join (strings.go:40)"}
	before := siteCounts{requests: 100, below: map[siteKey]map[string]*chainStack{}}
	after := siteCounts{requests: 100, below: map[siteKey]map[string]*chainStack{}}
	before.addBelow(k, sampleOf(heavyB), "/repo/", [2]float64{500})
	after.addBelow(k, sampleOf(heavyA), "/repo/", [2]float64{500})
	after.addBelow(k, sampleOf(moved), "/repo/", [2]float64{200})
	head, base := movedStack(before, after, k, k)
	if strings.Join(head, "|") != strings.Join(moved, "|") || base != nil {
		t.Fatalf("moved stack %v (base %v), want the RoutePattern chain", head, base)
	}
	changes := []schema.GoModChange{{File: "go.mod", Line: 5, Kind: "require", Path: "github.com/go-chi/chi/v5", Before: "v5.2.3", After: "v5.3.0"}}
	lc := lineChange{k: k, v: [2]float64{2, 64}, path: heavyA, moved: head, movedBase: base}
	c, frame, ok := moduleCause(lc, changes, true)
	if !ok || c.Line != 5 || !strings.HasPrefix(frame, "github.com/go-chi/chi/v5.(*Context).RoutePattern") {
		t.Errorf("module cause %+v at %q, want chi's RoutePattern", c, frame)
	}
	// A chain at both versions whose line moved says both lines.
	before.addBelow(k, sampleOf([]string{own, "github.com/go-chi/chi/v5.(*Mux).routeHTTP (mux.go:470)", "github.com/go-chi/chi/v5.(*Context).URLParam (context.go:60)"}), "/repo/", [2]float64{100})
	after.addBelow(k, sampleOf([]string{own, "github.com/go-chi/chi/v5.(*Mux).routeHTTP (mux.go:476)", "github.com/go-chi/chi/v5.(*Context).URLParam (context.go:66)"}), "/repo/", [2]float64{700})
	head, base = movedStack(before, after, k, k)
	lc = lineChange{k: k, v: [2]float64{6, 0}, path: heavyA, moved: head, movedBase: base}
	if _, frame, _ = moduleCause(lc, changes, true); frame != "github.com/go-chi/chi/v5.(*Context).URLParam (context.go:66; context.go:60 in the base)" {
		t.Errorf("frame %q, want URLParam at both lines", frame)
	}
}

// vendoredDep is example.com/dep at a version, vendored: Middleware's
// handler makes extra allocations of 32 B in wrapWork before it calls
// the handler it wraps, with no frame of the repository's on the stack.
func vendoredDep(extra int) string {
	return fmt.Sprintf(`package dep

import "net/http"

var sink [4]*[32]byte

//go:noinline
func wrapWork() {
	for i := 0; i < %d; i++ {
		sink[i] = new([32]byte)
	}
}

// Middleware wraps a handler.
func Middleware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wrapWork()
		h.ServeHTTP(w, r)
	})
}
`, extra)
}

const unownedServer = `package main

import (
	"flag"
	"log"
	"net"
	"net/http"

	"example.com/dep"
)

func user(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("GET /users/{id}", user)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(ln, dep.Middleware(http.DefaultServeMux)))
}
`

// TestReviewModuleUnowned: a vendored module's bump whose two more
// allocations a request run in its middleware, before the handler (no
// frame of the repository's on their stack: the allocations "moved
// entirely inside a dependency"), is annotated on go.mod's require line
// at the module's function, +2 allocs/req.
func TestReviewModuleUnowned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server at two revisions; skipped with -short")
	}
	goMod := func(v string) string {
		return fmt.Sprintf("module example.com/unowned\n\ngo 1.26\n\nrequire example.com/dep %s\n", v)
	}
	modules := func(v string) string {
		return fmt.Sprintf("# example.com/dep %s\n## explicit; go 1.26\nexample.com/dep\n", v)
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	base := r.commit(map[string]string{"go.mod": goMod("v1.0.0"), "server/main.go": unownedServer,
		"vendor/modules.txt": modules("v1.0.0"), "vendor/example.com/dep/dep.go": vendoredDep(0),
		".perfspy.yml": "servers:\n  - name: api\n    target: ./server\n    path: /users/7\n"}, "base")
	head := r.commit(map[string]string{"go.mod": goMod("v1.1.0"), "vendor/modules.txt": modules("v1.1.0"), "vendor/example.com/dep/dep.go": vendoredDep(2)}, "bump example.com/dep to v1.1.0")
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
	found := false
	for _, a := range res.Annotations {
		t.Logf("%s:%d %s: %s", a.File, a.Line, a.Title, a.Message)
		if a.File == "go.mod" && a.Line == 5 && a.Metric == "allocs/req" {
			found = true
			if math.Abs(a.Delta-2) > 0.01 || !strings.Contains(a.Message, "at example.com/dep.wrapWork") {
				t.Errorf("go.mod annotation %+v: want +2 at example.com/dep.wrapWork", a)
			}
		}
	}
	if !found {
		t.Errorf("no allocation annotation on go.mod:5\n%s", o.String())
	}
}
