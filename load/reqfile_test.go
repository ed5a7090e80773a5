package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/perfspy/perfspy/internal/limits"
)

func TestParseRequests(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "perf")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "body.json"), []byte(`{"a":1}`), 0o644)
	// A secret beside the request file's folder, a link to it inside, and
	// a FIFO, whose open() would wait for a writer for ever.
	os.WriteFile(filepath.Join(top, "secret.txt"), []byte("secret"), 0o600)
	os.Symlink(filepath.Join(top, "secret.txt"), filepath.Join(dir, "link.txt"))
	if err := mkfifo(filepath.Join(dir, "fifo")); err != nil {
		t.Fatal(err)
	}
	src := `# a mix
GET /json weight=3

POST /echo?x=1 body=@body.json header="Content-Type: application/json" header="X-Quote: a \"b\""
HEAD /  weight=1
`
	reqs, err := ParseRequests(strings.NewReader(src), "mix.txt", dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 || reqs[0].Name() != "GET /json" || reqs[0].Weight != 3 || reqs[1].Path != "/echo?x=1" ||
		string(reqs[1].Body) != `{"a":1}` || reqs[1].Headers["Content-Type"] != "application/json" || reqs[1].Headers["X-Quote"] != `a "b"` || reqs[2].Method != "HEAD" {
		t.Errorf("parsed %+v", reqs)
	}
	for _, c := range []struct{ src, want string }{
		{"GET json", "mix.txt:1: path \"json\": must start with /"},
		{"# only\n\nget /", "mix.txt:3: method \"get\""},
		{"GET / weight=0", "mix.txt:1: weight \"0\""},
		{"GET / weight=x", "weight \"x\""},
		{"GET / body=x.json", "body \"x.json\": want body=@FILE"},
		{"GET / body=@nope.json", "mix.txt:1: body: lstat"},
		{"POST / body=@../secret.txt", "mix.txt:1: body: @../secret.txt: outside the request file's folder"},
		{"POST / body=@link.txt", "mix.txt:1: body: @link.txt: outside the request file's folder"},
		{"POST / body=@fifo", "fifo is not a regular file (a FIFO): refused before opening it"},
		{"GET / header=\"NoColon\"", "header \"NoColon\""},
		{"GET / color=red", "unknown key \"color\""},
		{"GET \"/a b\"", "mix.txt:1: path \"/a b\": byte 2 is ' '; percent-encode it (%20)"},
		{"GET /a\x00", "mix.txt:1: path \"/a\\x00\": byte 2"},
		{"GET / header=\"X-A: b\rc\"", "mix.txt:1: header X-A: its value holds a line break or NUL"},
		{"GET / header=\"X(A): b\"", "mix.txt:1: header name \"X(A)\""},
		{"POST / body=@/dev/zero", "mix.txt:1: body: @/dev/zero: name a body file relative to the request file's folder"},
		{"GET / header=\"A: b", "unterminated double quote"},
		{"GET", "want METHOD PATH"},
		{"# nothing\n", "no requests in it"},
	} {
		if _, err := ParseRequests(strings.NewReader(c.src), "mix.txt", dir, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.src, err, c.want)
		}
	}
}

func TestInterleave(t *testing.T) {
	got := Interleave([]Request{{Weight: 3}, {Weight: 1}})
	if !slices.Equal(got, []int{0, 0, 1, 0}) && !slices.Equal(got, []int{0, 1, 0, 0}) {
		t.Errorf("3:1 gives %v", got)
	}
	got = Interleave([]Request{{Weight: 2}, {Weight: 2}, {Weight: 1}})
	count := map[int]int{}
	for _, i := range got {
		count[i]++
	}
	if len(got) != 5 || count[0] != 2 || count[1] != 2 || count[2] != 1 {
		t.Errorf("2:2:1 gives %v", got)
	}
	// The order is smooth weighted round-robin's exactly, as its plain
	// form (every entry scored every step) makes it.
	plain := func(reqs []Request) []int {
		total := 0
		for _, r := range reqs {
			total += r.Weight
		}
		cur := make([]int, len(reqs))
		var order []int
		for range total {
			best := 0
			for i, r := range reqs {
				cur[i] += r.Weight
				if cur[i] > cur[best] {
					best = i
				}
			}
			cur[best] -= total
			order = append(order, best)
		}
		return order
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range 200 {
		reqs := make([]Request, 1+rng.IntN(30))
		for i := range reqs {
			reqs[i].Weight = 1 + rng.IntN(1+k%12)
		}
		if got, want := Interleave(reqs), plain(reqs); !slices.Equal(got, want) {
			t.Fatalf("weights %v: %v, want %v", reqs, got, want)
		}
	}
}

// TestLeanMix: the lean driver sends a mix in its order, each request as
// its entry says.
func TestLeanMix(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("X-E")]++
		mu.Unlock()
		w.Write([]byte("ok"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	mix := []Request{{Method: "GET", Path: "/a", Weight: 3, Headers: map[string]string{"X-E": "a"}}, {Method: "POST", Path: "/b?q=1", Weight: 1, Body: []byte("x")}}
	d, err := NewLean(HTTPOptions{URL: "http://" + ln.Addr().String() + "/", Conns: 2, Mix: mix})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.RunN(context.Background(), 400)
	if err != nil || r.OK != 400 {
		t.Fatalf("%+v %v", r, err)
	}
	// Under the lock: the driver reads its answers with raw system
	// calls, which the race detector does not see as synchronizing.
	mu.Lock()
	defer mu.Unlock()
	if seen["GET /a a"] != 300 || seen["POST /b?q=1 "] != 100 {
		t.Errorf("seen %v, want 300 GET /a and 100 POST /b", fmt.Sprint(seen))
	}
}

// FuzzParseRequests: any file gives requests or an error naming a line,
// and never panics.
// TestRequestFileBounds: a body file named on many lines is read once and
// its bytes shared; the distinct bodies together, the requests and the
// weights of one file are bounded, each refused with its line.
func TestRequestFileBounds(t *testing.T) {
	dir := t.TempDir()
	body := make([]byte, 1<<20)
	os.WriteFile(filepath.Join(dir, "big.bin"), body, 0o644)
	var src strings.Builder
	for range 50 {
		src.WriteString("POST /upload body=@big.bin\n")
	}
	reqs, err := ParseRequests(strings.NewReader(src.String()), "mix.txt", dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if len(r.Body) != len(body) || &r.Body[0] != &reqs[0].Body[0] {
			t.Fatalf("request %d: its body is not the first request's bytes (read again)", i)
		}
	}
	// Distinct bodies: 5 files of 1 MiB under -max-body 1 MiB hold 5 MiB,
	// over 4 × 1 MiB.
	src.Reset()
	for i := range 5 {
		name := fmt.Sprintf("b%d.bin", i)
		os.WriteFile(filepath.Join(dir, name), body, 0o644)
		fmt.Fprintf(&src, "POST /b%d body=@%s\n", i, name)
	}
	if _, err := ParseRequests(strings.NewReader(src.String()), "mix.txt", dir, 1<<20); err == nil || !strings.Contains(err.Error(), "mix.txt:5: body: the request file's bodies of 5242880 bytes together, over the limit of 4194304") || !strings.Contains(err.Error(), "-max-body raises it") {
		t.Errorf("5 MiB of distinct bodies under -max-body 1 MiB: %v", err)
	}
	src.Reset()
	for i := range limits.RequestEntries + 1 {
		fmt.Fprintf(&src, "GET /r%d\n", i)
	}
	if _, err := ParseRequests(strings.NewReader(src.String()), "mix.txt", dir, 0); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("mix.txt:%d: more than %d requests", limits.RequestEntries+1, limits.RequestEntries)) {
		t.Errorf("%d requests: %v", limits.RequestEntries+1, err)
	}
	src.Reset()
	for i := range limits.MixRound/1000 + 1 {
		fmt.Fprintf(&src, "GET /r%d weight=1000\n", i)
	}
	if _, err := ParseRequests(strings.NewReader(src.String()), "mix.txt", dir, 0); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("mix.txt:%d: the weights add up to more than %d", limits.MixRound/1000+1, limits.MixRound)) {
		t.Errorf("weights over %d: %v", limits.MixRound, err)
	}
}

// BenchmarkRequestFile: a file at the bounds, parsed and ordered (the
// setup before the first window): 10,000 requests of distinct weights.
func BenchmarkRequestFile(b *testing.B) {
	var src strings.Builder
	for i := range limits.RequestEntries {
		fmt.Fprintf(&src, "GET /r%d weight=%d\n", i, 1+i%9)
	}
	for b.Loop() {
		reqs, err := ParseRequests(strings.NewReader(src.String()), "mix.txt", b.TempDir(), 0)
		if err != nil {
			b.Fatal(err)
		}
		Interleave(reqs)
	}
}

func FuzzParseRequests(f *testing.F) {
	f.Add("GET /json weight=3\nPOST /x header=\"A: b\"\n")
	f.Add("# c\n\nGET / weight=1000")
	f.Add("GET \"/a b\"\nGET /x header=\"A: b\\rc\"\n")
	f.Add("POST /x body=@/dev/zero\n")
	f.Fuzz(func(t *testing.T, src string) {
		reqs, err := ParseRequests(strings.NewReader(src), "f", t.TempDir(), 1<<10)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		for _, r := range reqs {
			if r.Weight < 1 || !strings.HasPrefix(r.Path, "/") || r.Method == "" || CheckPath(r.Path) != nil || len(r.Body) > 1<<10 {
				t.Errorf("accepted %+v", r)
			}
			for k, v := range r.Headers {
				if CheckHeader(k, v) != nil {
					t.Errorf("accepted header %q: %q", k, v)
				}
			}
		}
		if o := Interleave(reqs); len(o) == 0 {
			t.Error("empty order")
		}
	})
}
