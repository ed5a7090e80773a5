package review

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/internal/cmdmain"
)

// The false-alarm repository: a server whose routes move their counts
// with no change to the code (a sync.Pool the GC empties, a map that
// grows for ever, a tiny allocation whose size-class bytes depend on who
// opens the 16-byte block) beside one whose 64-byte allocation a head
// makes 16, and a benchmark of a pool.
const alarmServer = `package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
)

var pool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func pooled(w http.ResponseWriter, r *http.Request) {
	b := pool.Get().(*bytes.Buffer)
	b.Reset()
	b.WriteString("pooled ")
	b.WriteString(r.URL.Path)
	//POOLED
	w.Write(b.Bytes())
	pool.Put(b)
}

var (
	mu   sync.Mutex
	seen = map[string]int{}
	n    int
)

func remember(w http.ResponseWriter, r *http.Request) {
	mu.Lock()
	seen[strconv.Itoa(n)] = n
	n++
	mu.Unlock()
	w.Write([]byte("ok"))
}

var sink []byte

func buf(w http.ResponseWriter, r *http.Request) {
	sink = make([]byte, 64)
	//BUF
	w.Write(sink[:2])
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("GET /pooled", pooled)
	http.HandleFunc("GET /remember", remember)
	http.HandleFunc("GET /buf", buf)
	http.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stderr, "listening on", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}
`

const alarmPool = `package pool

import (
	"bytes"
	"sync"
)

var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Render writes s into a pooled buffer.
func Render(s string) int {
	b := bufs.Get().(*bytes.Buffer)
	b.Reset()
	b.WriteString(s)
	n := b.Len()
	bufs.Put(b)
	return n
}
`

const alarmPoolTest = `package pool

import "testing"

var N int

func BenchmarkRender(b *testing.B) {
	for b.Loop() {
		N = Render("hello")
	}
}
`

const alarmConfig = `servers:
  - name: app
    target: ./server
    requests: perf/requests.txt
benchmarks:
  - package: ./pool
    benchtime: 20000x
warmup: 300ms
duration: 1s
`

// makeAlarmRepo makes the repository on main, and the heads: "comment"
// (a comment changes), "shrink" (the 64-byte allocation made 16 on the
// next line) and "pooled" (one more 32-byte allocation per request in the
// pooled route).
func makeAlarmRepo(t *testing.T) (r *repo, base string, heads map[string]string, src map[string]string) {
	r = &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	base = r.commit(map[string]string{"go.mod": "module example.com/fa\n\ngo 1.26\n", "server/main.go": alarmServer,
		"pool/pool.go": alarmPool, "pool/pool_test.go": alarmPoolTest, ".perfspy.yml": alarmConfig,
		"perf/requests.txt": "GET /pooled\nGET /remember\nGET /buf\nGET /health\n"}, "base")
	src = map[string]string{
		"comment": strings.Replace(alarmServer, "//BUF", "// A comment changes nothing.", 1),
		"shrink":  strings.Replace(alarmServer, "\tsink = make([]byte, 64)\n\t//BUF", "\t// Sixteen bytes are enough.\n\tsink = make([]byte, 16)", 1),
		"pooled":  strings.Replace(alarmServer, "//POOLED", "sink = make([]byte, 32) // one more per request", 1),
	}
	heads = map[string]string{}
	for _, name := range []string{"comment", "shrink", "pooled"} {
		r.git("checkout", "-q", "-b", name, base)
		heads[name] = r.commit(map[string]string{"server/main.go": src[name]}, name)
	}
	src["noput"] = strings.Replace(alarmPool, "\tbufs.Put(b)\n", "", 1)
	r.git("checkout", "-q", "-b", "noput", base)
	heads["noput"] = r.commit(map[string]string{"pool/pool.go": src["noput"]}, "noput")
	return r, base, heads, src
}

// TestNoFalseAlarm: counts-only reviews (one run per revision, as on
// every push) of a head that changes a comment fail no gate and annotate
// no line, over a pooled route, a growing map, a tiny allocation and a
// benchmarked pool; a 64-byte allocation made 16 is a notice of -48 B,
// no error; one more allocation per request on the pooled route is caught
// on its line. PERFSPY_ALARM_REVIEWS=N repeats the comment's review N
// times and reports the false alarms (docs/review.md quotes 20).
func TestNoFalseAlarm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server and a benchmark at several revisions; skipped with -short")
	}
	r, base, heads, src := makeAlarmRepo(t)
	// The reviews share one base: its results come from the review cache
	// after the first (as on a pull request's every push).
	cache := t.TempDir()
	reviews := 0
	review := func(head string) (int, string, string) {
		out := filepath.Join(t.TempDir(), "review")
		var o, e strings.Builder
		start := time.Now()
		code := Main(context.Background(), []string{"-q", "-repo", r.dir, "-base", base, "-head", head, "-out", out, "-timings=false", "-cache", cache}, &o, &e)
		// How long a review takes (docs/review.md, "How long it takes"):
		// the first measures both revisions, the others the head only.
		reviews++
		t.Logf("review %d (%s): %.1f s", reviews, map[bool]string{true: "base and head", false: "head; the base from the cache"}[reviews == 1], time.Since(start).Seconds())
		md, _ := os.ReadFile(filepath.Join(out, "review.md"))
		return code, o.String(), e.String() + string(md)
	}
	n := 1
	if v, err := strconv.Atoi(os.Getenv("PERFSPY_ALARM_REVIEWS")); err == nil && v > 0 {
		n = v
	}
	alarms := 0
	for i := range n {
		code, stdout, md := review(heads["comment"])
		if code != cmdmain.OK || strings.Contains(stdout, "::error") || strings.Contains(stdout, "::warning") {
			alarms++
			t.Errorf("comment review %d: exit %d\n%s\n%s", i+1, code, stdout, md)
		}
	}
	t.Logf("%d false alarms in %d reviews of a comment-only head", alarms, n)

	code, stdout, md := review(heads["shrink"])
	line := lineOf(t, src["shrink"], "make([]byte, 16)")
	want := fmt.Sprintf("::notice file=server/main.go,line=%d,title=perfspy%%3A allocations fell in main.buf::+0.00 allocs/req (-48 B asked for) in GET /buf", line)
	if code != cmdmain.OK || !strings.Contains(stdout, want) || strings.Contains(stdout, "::error") {
		t.Errorf("64 B made 16: exit %d, want 0 and %q\n%s\n%s", code, want, stdout, md)
	}

	code, stdout, md = review(heads["pooled"])
	want = fmt.Sprintf("::error file=server/main.go,line=%d,title=perfspy%%3A allocations grew in main.pooled::+1.00 allocs/req (+32 B asked for) in GET /pooled", lineOf(t, src["pooled"], "one more per request"))
	if code != cmdmain.Failed || !strings.Contains(stdout, want) {
		t.Errorf("one more allocation on the pooled route: exit %d, want 1 and %q\n%s\n%s", code, want, stdout, md)
	}
	if strings.Count(stdout, "::error") != 1 {
		t.Errorf("other lines annotated as errors:\n%s", stdout)
	}

	// A pool's Put deleted: its New runs at every op, exactly, and the
	// buffer it makes grows anew; both fail with the pool named.
	code, stdout, md = review(heads["noput"])
	for _, want := range []string{
		"::error file=pool/pool.go,line=8,title=perfspy%3A allocations grew in pool.init.func1::+1.00 allocs/op (+40 B asked for) in BenchmarkRender",
		"the pool's New runs at pool.Render's Get (pool/pool.go:12) at every op now",
		fmt.Sprintf("::error file=pool/pool.go,line=%d,title=perfspy%%3A allocations grew in pool.Render::+1.00 allocs/op (+64 B asked for)", lineOf(t, src["noput"], "b.WriteString(s)")),
		"the object the pool hands out at pool/pool.go:12 is a new one at every op now",
	} {
		if code != cmdmain.Failed || !strings.Contains(stdout, want) {
			t.Errorf("a pool's Put deleted: exit %d, want 1 and %q\n%s\n%s", code, want, stdout, md)
		}
	}
}
