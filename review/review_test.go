package review

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/schema"
)

// The test repository: a server whose GET /users/{id} handler and a codec
// whose Encode the head revision each make allocate once more, on known
// lines.
const serverBase = `package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"example.com/rv/codec"
)

var sink []byte

func user(w http.ResponseWriter, r *http.Request) {
	b := codec.Encode(r.PathValue("id"))
	//EXTRA
	w.Write(b)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("GET /users/{id}", user)
	http.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stderr, "listening on", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}
`

const codecBase = `package codec

var Sink []byte

// Encode returns the user's record.
//
//go:noinline
func Encode(id string) []byte {
	b := make([]byte, 0, 64)
	b = append(b, "user "...)
	//EXTRA
	return append(b, id...)
}
`

const codecTest = `package codec

import "testing"

func BenchmarkEncode(b *testing.B) {
	for b.Loop() {
		Sink = Encode("42")
	}
}
`

const configYAML = `# what probe review measures
servers:
  - name: api
    target: ./server
    requests: perf/requests.txt
benchmarks:
  - package: ./codec
    bench: 'BenchmarkEncode$'
    benchtime: 2000x
gates:
  allocs/req: 0%
  B/req: 1%
  allocs/op: 0%
warmup: 200ms
duration: 700ms
`

type repo struct {
	t   *testing.T
	dir string
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	out, err := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=perfspy test", "-c", "user.email=test@perfspy.invalid"}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *repo) commit(files map[string]string, msg string) string {
	r.t.Helper()
	for name, src := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// lineOf is the 1-based line of the first line of src containing s.
func lineOf(t *testing.T, src, s string) int {
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("no line with %q", s)
	return 0
}

// makeReviewRepo makes the repository: main (the base), then branch "extra"
// (one more 64-byte allocation per request in main.user, one more per op
// in codec.Encode, kept on a list, each on its own new line), and
// "comment" from main
// (a comment changes).
func makeReviewRepo(t *testing.T) (r *repo, base, extra, comment string, serverHead, codecHead string) {
	r = &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	base = r.commit(map[string]string{"go.mod": "module example.com/rv\n\ngo 1.26\n", "server/main.go": serverBase, "codec/codec.go": codecBase,
		"codec/codec_test.go": codecTest, ".perfspy.yml": configYAML,
		"perf/requests.txt": "GET /users/7\nGET /health\n"}, "base")
	r.git("checkout", "-q", "-b", "extra")
	serverHead = strings.Replace(serverBase, "//EXTRA", "sink = make([]byte, 64) // one more per request", 1)
	codecHead = strings.Replace(codecBase, "//EXTRA", "Kept = &node{next: Kept} // one more per op, kept", 1)
	codecHead = strings.Replace(codecHead, "var Sink []byte", "var Sink []byte\n\n// node is 16 bytes: kept on a list, exactly one per call.\ntype node struct {\n\tnext *node\n\tn    int\n}\n\nvar Kept *node", 1)
	extra = r.commit(map[string]string{"server/main.go": serverHead, "codec/codec.go": codecHead}, "extra allocations")
	r.git("checkout", "-q", "-b", "comment", base)
	comment = r.commit(map[string]string{"server/main.go": strings.Replace(serverBase, "//EXTRA", "// A comment changes nothing.", 1)}, "a comment")
	return
}

func runReview(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	full := append([]string{"-q", "-repo", dir, "-rounds", "2", "-warmup", "200ms", "-duration", "700ms"}, args...)
	code = Main(context.Background(), full, &o, &e)
	return code, o.String(), e.String()
}

// TestReview: the head that adds an allocation per request in a handler
// and one per op in a benchmarked function, kept, fails the 0% gates, and
// each annotation names the file and the line (in the head) that added it
// (the kept one twice: allocations, and memory left live); the
// head that changes a comment passes with no count changed.
func TestReview(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server and a benchmark at two revisions; skipped with -short")
	}
	r, base, extra, comment, serverHead, codecHead := makeReviewRepo(t)
	out := filepath.Join(t.TempDir(), "review")
	summary := filepath.Join(t.TempDir(), "step-summary.md")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	code, stdout, stderr := runReview(t, r.dir, "-base", base, "-head", extra, "-out", out)
	if code != cmdmain.Failed || !strings.Contains(stderr, "gate failed") {
		t.Fatalf("exit %d, want 1 (a gate failed)\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("::error file=server/main.go,line=%d,title=perfspy%%3A allocations grew in main.user::+1.00 allocs/req (+64 B asked for) in GET /users/{id}", lineOf(t, serverHead, "one more per request")),
		fmt.Sprintf("::error file=codec/codec.go,line=%d,title=perfspy%%3A allocations grew in codec.Encode::", lineOf(t, codecHead, "one more per op")),
		fmt.Sprintf("::error file=codec/codec.go,line=%d,title=perfspy%%3A memory left live grew in codec.Encode::", lineOf(t, codecHead, "one more per op")),
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	md := readFile(t, filepath.Join(out, "review.md"))
	for _, want := range []string{"FAIL", "server api, GET /users/{id}", "allocs/req", "BenchmarkEncode", "`main.user`", "`example.com/rv/codec.Encode`"} {
		if !strings.Contains(md, want) {
			t.Errorf("review.md lacks %q:\n%s", want, md)
		}
	}
	if s := readFile(t, summary); s != md+"\n" {
		t.Errorf("GITHUB_STEP_SUMMARY holds %d bytes, not review.md", len(s))
	}
	// review.json decodes into package schema's type, every key known.
	var res schema.Review
	dec := json.NewDecoder(strings.NewReader(readFile(t, filepath.Join(out, "review.json"))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("review.json into schema.Review: %v", err)
	}
	if res.Items[0].Route == "" {
		t.Errorf("review.json names no route for server %s", res.Items[0].Name)
	}
	if res.Schema != Schema || res.Verdict != "fail" || len(res.Annotations) < 2 {
		t.Errorf("review.json: schema %s, verdict %s, %d annotations", res.Schema, res.Verdict, len(res.Annotations))
	}
	// Each route on its own: the handler that allocates more, and the one
	// that does not.
	routes := map[string]schema.ReviewChange{}
	for _, c := range res.Items[0].Changes {
		if c.Metric == "allocs/req" {
			routes[c.Subject] = c
		}
	}
	if u, h := routes["GET /users/{id}"], routes["GET /health"]; u.Verdict != "regression" || !u.Failed || u.Delta < 1.98 || u.Delta > 2.02 || h.Verdict != "no change" {
		t.Errorf("allocs/req by route: %+v", routes)
	}
	if ann := readFile(t, filepath.Join(out, "annotations.txt")); !strings.HasPrefix(stdout, ann) {
		t.Errorf("annotations.txt is not what stdout printed:\n%s", ann)
	}
	t.Logf("review.md:\n%s", md)

	out2 := filepath.Join(t.TempDir(), "review")
	code, stdout, stderr = runReview(t, r.dir, "-base", base, "-head", comment, "-out", out2)
	if code != cmdmain.OK || strings.Contains(stdout, "::") {
		t.Fatalf("a comment: exit %d, want 0 and no annotation\n%s%s", code, stdout, stderr)
	}
	var res2 Result
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out2, "review.json"))), &res2); err != nil {
		t.Fatal(err)
	}
	for _, it := range res2.Items {
		for _, c := range it.Changes {
			// compiler-copied-B is measured with instructions only.
			notMeasured := c.Verdict == "not measured" && strings.HasPrefix(c.Metric, "compiler-copied-B/")
			if IsCount(c.Metric) && c.Verdict != "no change" && !notMeasured {
				t.Errorf("a comment: %s %s %s: %s", it.Name, c.Subject, c.Metric, c.Verdict)
			}
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReviewCache: with -timings=false a review compares exact counts, one
// run per revision; with -cache the base's runs are kept, and the second
// review of the same base measures only the head, with the same verdict
// and the same annotations.
func TestReviewCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server and a benchmark; skipped with -short")
	}
	r, base, extra, _, _, _ := makeReviewRepo(t)
	cache := filepath.Join(t.TempDir(), "cache")
	var anns [2]string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "review")
		var o, e bytes.Buffer
		code := Main(context.Background(), []string{"-repo", r.dir, "-base", base, "-head", extra, "-out", out, "-timings=false", "-cache", cache}, &o, &e)
		if code != cmdmain.Failed {
			t.Fatalf("review %d: exit %d\n%s%s", i+1, code, o.String(), e.String())
		}
		anns[i] = readFile(t, filepath.Join(out, "annotations.txt"))
		cached := strings.Count(e.String(), "the base's counts from the cache")
		befores, _ := filepath.Glob(filepath.Join(out, "*", "*", "runs", "*-before"))
		afters, _ := filepath.Glob(filepath.Join(out, "*", "*", "runs", "*-after"))
		if want := []int{0, 2}[i]; cached != want || len(afters) != 2 || len(befores) != 2-want {
			t.Errorf("review %d: %d items from the cache (want %d), %d base runs, %d head runs\n%s", i+1, cached, want, len(befores), len(afters), e.String())
		}
		var res Result
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "review.json"))), &res); err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			if !it.Judged {
				t.Errorf("review %d: %s not judged: %v", i+1, it.Name, it.Reasons)
			}
		}
	}
	if anns[0] != anns[1] || !strings.Contains(anns[1], "::error file=server/main.go") {
		t.Errorf("the annotations differ:\n%s\n---\n%s", anns[0], anns[1])
	}
	// One entry edited by hand (as a pull request's code could): it is
	// not believed, its base is measured again, the verdict stands.
	sums, _ := filepath.Glob(filepath.Join(cache, "*", "runs", "*", "summary.json"))
	if len(sums) == 0 {
		t.Fatal("no summary.json in the cache")
	}
	b := []byte(readFile(t, sums[0]))
	os.WriteFile(sums[0], bytes.Replace(b, []byte(`"allocs": `), []byte(`"allocs": 1`), 1), 0o644)
	out := filepath.Join(t.TempDir(), "review")
	var o, e bytes.Buffer
	if code := Main(context.Background(), []string{"-repo", r.dir, "-base", base, "-head", extra, "-out", out, "-timings=false", "-cache", cache}, &o, &e); code != cmdmain.Failed {
		t.Fatalf("review after the edit: exit %d\n%s%s", code, o.String(), e.String())
	}
	if n := strings.Count(e.String(), "do not match the cache's record"); n != 1 || strings.Count(e.String(), "the base's counts from the cache") != 1 {
		t.Errorf("after one entry was edited: %d refused, want 1, and one taken\n%s", n, e.String())
	}
}

// TestCacheRecord: an entry is believed when its bytes match the record
// the review that stored it wrote; edited, or planted with no record, it
// is not, and a new store replaces it.
func TestCacheRecord(t *testing.T) {
	dir, abDir := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(abDir, "runs", "01-before"), 0o755)
	os.WriteFile(filepath.Join(abDir, "runs", "01-before", "summary.json"), []byte(`{"allocs": 2}`), 0o644)
	ab := &probe.ABResult{Dir: abDir, Worktrees: map[string]string{"before": "/wt"}}
	c := openCache(dir)
	if err := c.store("k", ab); err != nil {
		t.Fatal(err)
	}
	if runs, wt, why, ok := openCache(dir).lookup("k"); !ok || len(runs) != 1 || wt != "/wt" || why != "" {
		t.Fatalf("as stored: %v %q %q %v", runs, wt, why, ok)
	}
	entry := filepath.Join(dir, "k", "runs", "01-before", "summary.json")
	os.WriteFile(entry, []byte(`{"allocs": 1}`), 0o644)
	if _, _, why, ok := openCache(dir).lookup("k"); ok || !strings.Contains(why, "do not match") {
		t.Errorf("edited: taken %v (%q)", ok, why)
	}
	if err := openCache(dir).store("k", ab); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(entry); string(b) != `{"allocs": 2}` {
		t.Errorf("the edited entry was not replaced: %s", b)
	}
	os.MkdirAll(filepath.Join(dir, "planted", "runs", "01-before"), 0o755)
	os.WriteFile(filepath.Join(dir, "planted", "worktree"), []byte("/wt\n"), 0o644)
	if _, _, _, ok := openCache(dir).lookup("planted"); ok {
		t.Error("an entry with no record is taken")
	}
}

// TestNewInHead: a server or package the head adds is reported as new,
// with nothing to compare, where probe ab would fail on the base's missing
// folder; one the base has is measured.
func TestNewInHead(t *testing.T) {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	base := r.commit(map[string]string{"go.mod": "module example.com/n\n\ngo 1.26\n", "old/main.go": "package main\n\nfunc main() {}\n"}, "base")
	r.commit(map[string]string{"fresh/main.go": "package main\n\nfunc main() {}\n"}, "head")
	m := measurer{root: r.dir, base: base}
	it, ok := m.newInHead(context.Background(), "server", "fresh", "./fresh")
	if !ok || it.Judged || len(it.Reasons) != 1 || !strings.Contains(it.Reasons[0], "new in the head") || !strings.Contains(it.Reasons[0], "./fresh") {
		t.Errorf("a server the head adds: %+v, %v", it, ok)
	}
	if it, ok := m.newInHead(context.Background(), "server", "old", "./old"); ok {
		t.Errorf("a server the base has is called new: %+v", it)
	}
	// The repository's root (package: .) is never new.
	if it, ok := m.newInHead(context.Background(), "benchmarks", ". .", "."); ok {
		t.Errorf("the root is called new: %+v", it)
	}
}

// TestHeadRewritesCachedBase: a head whose init() rewrites the base's
// cached profiles (the review's -cache folder, found as a hostile head
// finds it) cannot turn a failing review into a pass: the base's rounds
// are pinned before the head runs, and a changed file ends the item.
func TestHeadRewritesCachedBase(t *testing.T) {
	if testing.Short() {
		t.Skip("reviews a benchmark package twice; skipped with -short")
	}
	cache := filepath.Join(t.TempDir(), "cache")
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	bench := "package codec\n\nimport \"testing\"\n\nvar sink []byte\n\nfunc BenchmarkOp(b *testing.B) {\n\tfor b.Loop() {\n\t\tsink = make([]byte, 64)\n\t}\n}\n"
	conf := "benchmarks:\n  - package: ./codec\n    bench: .\n    benchtime: 2000x\n"
	base := r.commit(map[string]string{"go.mod": "module example.com/hostile\n\ngo 1.26\n", "codec/codec_test.go": bench, ".perfspy.yml": conf}, "base")
	// The head allocates twice as much per op, and its init() rewrites
	// every cached profile of the base it can find.
	evil := strings.Replace(bench, "\t\tsink = make([]byte, 64)\n", "\t\tsink = make([]byte, 64)\n\t\tsink = make([]byte, 64)\n", 1)
	evil = strings.Replace(evil, "import \"testing\"\n", "import (\n\t\"os\"\n\t\"path/filepath\"\n\t\"testing\"\n)\n\nfunc init() {\n\tfiles, _ := filepath.Glob(filepath.Join("+strconv.Quote(cache)+", \"*\", \"runs\", \"*-before\", \"*\", \"*.pb.gz\"))\n\tfor _, f := range files {\n\t\tos.WriteFile(f, []byte(\"rewritten\"), 0o644)\n\t}\n}\n", 1)
	head := r.commit(map[string]string{"codec/codec_test.go": evil}, "head")
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "review")
		var o, e bytes.Buffer
		code := Main(context.Background(), []string{"-q", "-repo", r.dir, "-base", base, "-head", head, "-out", out, "-timings=false", "-cache", cache}, &o, &e)
		t.Logf("review %d: exit %d\n%s%s", i+1, code, o.String(), e.String())
		if code == cmdmain.OK || strings.Contains(o.String(), "review: pass") {
			t.Errorf("review %d passed", i+1)
		}
		if i == 1 && !strings.Contains(o.String()+e.String(), "changed after the round ended") {
			t.Errorf("review %d does not say the base's results changed", i+1)
		}
	}
}
