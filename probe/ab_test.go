package probe

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/load"

	"golang.org/x/perf/benchfmt"

	"github.com/perfspy/perfspy/internal/gorelease"
	"github.com/perfspy/perfspy/internal/worktree"
)

// serverSource is the source of a test server whose /work handler runs
// handler, with decls beside main.
func serverSource(decls, handler string) string {
	return `package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
)

` + decls + `

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		` + handler + `
		w.Write([]byte("ok"))
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stderr, "listening on", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}
`
}

var abServer = serverSource(`var sink []byte
var spinSink int

//go:noinline
func spin() {
	x := 1
	for i := 0; i < 300000; i++ {
		x = x*1664525 + 1013904223
	}
	spinSink = x
}

//EXTRA`, "spin()\n\t\t//CALL")

// testRepo is a git repository holding one server module, for probe ab.
type testRepo struct {
	t      *testing.T
	dir    string
	module string
}

func newTestRepo(t *testing.T, module string) *testRepo {
	r := &testRepo{t: t, dir: t.TempDir(), module: module}
	r.git("init", "-q", "-b", "main")
	return r
}

// git runs a git command in the repository and returns its output.
func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=perfspy test", "-c", "user.email=test@perfspy.invalid"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes src as server/main.go and commits it; it returns the commit.
func (r *testRepo) commit(src, msg string) string {
	os.MkdirAll(filepath.Join(r.dir, "server"), 0o755)
	os.WriteFile(filepath.Join(r.dir, "go.mod"), []byte("module "+r.module+"\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(r.dir, "server", "main.go"), []byte(src), 0o644)
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// makeRepo makes a git repository with a server module: commit 1, commit 2
// adding one 64-byte allocation per request in main.extraAlloc, and commit
// 3 (from 1) changing only a comment.
func makeRepo(t *testing.T) (dir, c1, c2, c3 string) {
	t.Helper()
	r := newTestRepo(t, "example.com/abtest")
	c1 = r.commit(abServer, "one")
	c2 = r.commit(strings.Replace(strings.Replace(abServer, "//EXTRA", "//go:noinline\nfunc extraAlloc() { sink = make([]byte, 64) }", 1), "//CALL", "extraAlloc()", 1), "two: one more allocation per request")
	r.git("checkout", "-q", "-b", "noop", c1)
	c3 = r.commit(strings.Replace(abServer, "//EXTRA", "// A comment changes nothing.", 1), "three: a comment")
	return r.dir, c1, c2, c3
}

func abConfig(dir, before, after string, out string) ABConfig {
	return ABConfig{Repo: dir, Before: before, After: after, Rounds: 4, Out: out,
		Run: Config{Spec: load.Spec{Path: "/work"}, TargetConfig: TargetConfig{Target: filepath.Join(dir, "server")}, CountConfig: CountConfig{Copies: "off"}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: 700 * time.Millisecond}}}
}

// TestABRegression: one more allocation per request is +1.00 allocs/req,
// names main.extraAlloc, and fails the gate.
func TestABRegression(t *testing.T) {
	skipShort(t)
	dir, c1, c2, _ := makeRepo(t)
	out := filepath.Join(t.TempDir(), "ab")
	cfg := abConfig(dir, c1, c2, out)
	cfg.MaxRegress = map[string]float64{"allocs/req": 1}
	res, err := AB(context.Background(), cfg, nil)
	checkNoOrphans(t)
	if !errors.Is(err, ErrRegression) || !strings.Contains(err.Error(), "allocs/req") {
		t.Fatalf("error %v, want a regression of allocs/req", err)
	}
	m := res.Metrics["allocs/req"]
	t.Logf("allocs/req %.4f -> %.4f (%+.4f), verdict %s; order %s", m.Before, m.After, m.Delta, m.Verdict, res.Order)
	// The total moves with the server's reads as well: what
	// net.(*conn).Read allocates depends on whether a read finds its
	// bytes there or waits (-0.014 and -0.025 allocs/req between two
	// rounds' arms, at the session's base commit too), so the total is
	// +1 within 0.03; main.extraAlloc's own row, below, is +1.00 exactly.
	if math.Abs(m.Delta-1) > 0.03 || m.Verdict != "regression" {
		t.Errorf("allocs/req delta %.4f (%s), want +1.00 regression", m.Delta, m.Verdict)
	}
	if b := res.Metrics["B/req"]; math.Abs(b.Delta-64) > 3 { // the total, with background noise of a byte or two
		t.Errorf("B/req delta %.2f, want +64", b.Delta)
	}
	// Every request allocates once more: the slowest 1%'s own bills too.
	for _, prof := range []string{"allocs", "tail_allocs"} {
		found := false
		for _, f := range res.Functions {
			if f.Profile == prof && f.Key == "main.extraAlloc" && math.Abs(f.Delta-1) < 1e-9 {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: main.extraAlloc +1.00 not among the functions: %+v", prof, res.Functions)
		}
	}
	// The tail's time is compared round by round, part by part.
	for _, p := range TailParts {
		if x := res.Tail[p]; x == nil || x.JudgedAs != "timing" || (p == "duration" || p == "cpu") && (x.Before <= 0 || x.After <= 0) {
			t.Errorf("tail %s: %+v", p, x)
		}
	}
	if res.Order != "ABBAABBA" {
		t.Errorf("order %s, want ABBAABBA", res.Order)
	}
	for _, f := range []string{"ab.json", "bench.txt", "report.md", "report.html"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if rep := readFile(t, filepath.Join(out, "report.md")); !strings.Contains(rep, "main.extraAlloc") || !strings.Contains(rep, "Gate failed") || !strings.Contains(rep, "The slowest 1% of requests, by their own bills") {
		t.Errorf("report.md:\n%s", rep)
	}
	// bench.txt puts the arms in columns for benchstat.
	r := benchfmt.NewReader(bytes.NewReader([]byte(readFile(t, filepath.Join(out, "bench.txt")))), "bench.txt")
	arms := map[string]int{}
	for r.Scan() {
		if res, ok := r.Result().(*benchfmt.Result); ok {
			arms[res.GetConfig("arm")]++
		}
	}
	if arms["before"] != 4 || arms["after"] != 4 {
		t.Errorf("bench.txt arms %v, want 4 results each", arms)
	}
	// The command exits 1 and names the metric.
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"ab", "-q", "-before", c1, "-after", c2, "-repo", dir, "-rounds", "2", "-copies", "off", "-offcpu=false",
		"-warmup", "200ms", "-duration", "500ms", "-path", "/work", "-max-regress", "allocs/req=1%", "-out", filepath.Join(t.TempDir(), "ab2"), filepath.Join(dir, "server")}, &o, &e)
	if code != ExitFailed || !strings.Contains(e.String(), "allocs/req") {
		t.Errorf("probe ab: exit %d, stderr %q", code, e.String())
	}
}

// TestABNoChange: a commit that changes nothing gives "no change".
func TestABNoChange(t *testing.T) {
	skipShort(t)
	dir, c1, _, c3 := makeRepo(t)
	res, err := AB(context.Background(), abConfig(dir, c1, c3, filepath.Join(t.TempDir(), "ab")), nil)
	checkNoOrphans(t)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	for _, name := range []string{"allocs/req", "B/req", "syscalls/req"} {
		if m := res.Metrics[name]; m.Verdict != "no change" && !(name == "syscalls/req" && m.Verdict == "not judged") {
			t.Errorf("%s: %s (%+.4f)", name, m.Verdict, m.Delta)
		}
	}
	if err != nil {
		// A busy machine can leave a window generator-bound: that is the
		// one reason allowed here, and the tool must say it.
		for _, r := range res.Reasons {
			if !strings.Contains(r, "cores") {
				t.Errorf("not judged for another reason: %s", r)
			}
		}
		t.Logf("not judged on this machine: %v", res.Reasons)
	}
}

var loopServer = serverSource(`const iterations = 1000

var sink int

//go:noinline
func burn(n int) int {
	x := 0
	for i := 0; i < n; i++ {
		x += i ^ x
	}
	return x
}`, "sink = burn(iterations)")

// makeLoopRepo makes a repository whose server runs a loop per request:
// commit 1 with 1,000 iterations, commit 2 with 11,000, commit 3 (from 1)
// changing only a comment.
func makeLoopRepo(t *testing.T) (dir, c1, c2, c3 string) {
	t.Helper()
	r := newTestRepo(t, "example.com/abloop")
	c1 = r.commit(loopServer, "one")
	c2 = r.commit(strings.Replace(loopServer, "iterations = 1000", "iterations = 11000", 1), "two: 10,000 more iterations per request")
	r.git("checkout", "-q", "-b", "noop", c1)
	c3 = r.commit(strings.Replace(loopServer, "var sink int", "// A comment changes nothing.\nvar sink int", 1), "three: a comment")
	r.git("checkout", "-q", "main")
	return r.dir, c1, c2, c3
}

// TestABInstructions: 10,000 more iterations of a loop the disassembly
// says is L instructions long are +10,000 L instructions per request, a
// regression named in main.burn; a comment is no change.
func TestABInstructions(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	dir, c1, c2, c3 := makeLoopRepo(t)
	body := loopLengthIn(t, dir, "./server", "main.burn")
	want := float64(10000 * body)
	cfg := func(after string) ABConfig {
		return ABConfig{Repo: dir, Before: c1, After: after, Rounds: 2, Out: filepath.Join(t.TempDir(), "ab"),
			MaxRegress: map[string]float64{"instructions/req": 1},
			Run:        Config{Spec: load.Spec{Path: "/work"}, TargetConfig: TargetConfig{Target: filepath.Join(dir, "server")}, WindowConfig: WindowConfig{Instructions: true, Requests: 200}}}
	}
	res, err := AB(context.Background(), cfg(c2), nil)
	checkNoOrphans(t)
	if !errors.Is(err, ErrRegression) || !strings.Contains(err.Error(), "instructions/req") {
		t.Fatalf("error %v, want a regression of instructions/req", err)
	}
	m := res.Metrics["instructions/req"]
	t.Logf("instructions/req %.1f -> %.1f (%+.1f), verdict %s; the loop has %d instructions: want %+.0f", m.Before, m.After, m.Delta, m.Verdict, body, want)
	if math.Abs(m.Delta-want) > 0.01*want || m.Verdict != "regression" {
		t.Errorf("instructions/req delta %.1f (%s), want %+.0f regression", m.Delta, m.Verdict, want)
	}
	if len(res.Metrics) != 1 {
		t.Errorf("metrics %v, want instructions/req alone", res.Metrics)
	}
	found := false
	for _, f := range res.Functions {
		if f.Profile == "instructions" && f.Key == "main.burn" && math.Abs(f.Delta-want) < 0.01*want {
			found = true
		}
	}
	if !found {
		t.Errorf("main.burn %+.0f not among the functions: %+v", want, res.Functions)
	}
	rep := readFile(t, filepath.Join(res.Dir, "report.md"))
	if !strings.Contains(rep, "instructions/req") || !strings.Contains(rep, "main.burn") || !strings.Contains(rep, "callgrind") {
		t.Errorf("report.md:\n%s", rep)
	}
	bench := readFile(t, filepath.Join(res.Dir, "bench.txt"))
	if strings.Count(bench, "instructions/req\n") != 4 || strings.Contains(bench, "req/s") {
		t.Errorf("bench.txt:\n%s", bench)
	}

	res, err = AB(context.Background(), cfg(c3), nil)
	checkNoOrphans(t)
	if err != nil {
		t.Fatalf("a comment: %v", err)
	}
	if m := res.Metrics["instructions/req"]; m.Verdict != "no change" {
		t.Errorf("a comment: %s (%+.1f)", m.Verdict, m.Delta)
	}
}

func TestFuncScope(t *testing.T) {
	for key, want := range map[string]string{
		"runtime.mallocgc":                      ScopeRuntime,
		"internal/runtime/maps.(*Map).grow":     ScopeRuntime,
		"net/http.(*conn).serve":                ScopeStd,
		"encoding/json/v2.Marshal":              ScopeStd,
		"main.handleJSON":                       ScopeUser,
		"github.com/rs/zerolog.(*Event).Str":    ScopeUser,
		"example.com/mod/internal/x.F[...]":     ScopeUser,
		"internal/poll.(*FD).Read":              ScopeStd,
		"vendor/golang.org/x/net/http2/hpack.F": ScopeStd,
	} {
		if got := funcScope(key); got != want {
			t.Errorf("funcScope(%q) = %s, want %s", key, got, want)
		}
	}
}

// TestABToolchainFlags: two toolchains compare one tree without
// revisions; one toolchain alone, or no revision and no toolchain, is a
// usage error that says what is needed.
func TestABToolchainFlags(t *testing.T) {
	ab, err := ABConfigFromArgs([]string{"-before-go", "go1.26.8", "-after-go", "go1.27.3", "./targets/httpjson"})
	if err != nil || ab.BeforeGo != "go1.26.8" || ab.AfterGo != "go1.27.3" || ab.Before != "" {
		t.Fatalf("two toolchains: %+v, %v", ab, err)
	}
	for _, args := range [][]string{{"-before-go", "go1.26.8", "."}, {"."}, {"-before", "main", "."}} {
		if _, err := ABConfigFromArgs(args); err == nil || !strings.Contains(err.Error(), "-before") {
			t.Errorf("%q: %v", args, err)
		}
	}
	// A name GOTOOLCHAIN would not take is refused before anything is
	// built, by flag and by AB itself.
	for _, bad := range []string{"../../x", "go1.27.3;id", "go1.27.3 ", "1.27"} {
		args := []string{"-before-go", "go1.26.8", "-after-go", bad, "./targets/httpjson"}
		if _, err := ABConfigFromArgs(args); err == nil || !strings.Contains(err.Error(), "-after-go") || !strings.Contains(err.Error(), "want a Go release") {
			t.Errorf("%q: %v", bad, err)
		}
		if _, err := AB(context.Background(), ABConfig{BeforeGo: bad, AfterGo: "go1.27.3", Out: t.TempDir()}, nil); err == nil || !strings.Contains(err.Error(), "-before-go") {
			t.Errorf("AB with -before-go %q: %v", bad, err)
		}
	}
	for _, good := range []string{"go1.27.3", "go1.27", "go1.28rc1", "local", "auto", "path", "go1.27.3+auto"} {
		if err := gorelease.CheckToolchain("-after-go", good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}

// TestABToolchains: one tree built by Go 1.26 and Go 1.27 in interleaved
// rounds: each arm names the toolchain that built it, the user's code
// (main.orders: 3 allocations a request) does not move, and what moved is
// the runtime's or the standard library's.
func TestABToolchains(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "ab")
	cfg := ABConfig{BeforeGo: gorelease.Tested["go1.26"], AfterGo: gorelease.Tested["go1.27"], Rounds: 1, CountsOnly: true, Out: out,
		Run: Config{TargetConfig: TargetConfig{Target: "./testdata/othermod/cmd/server"}, Spec: load.Spec{Path: "/orders"}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: 500 * time.Millisecond}, CountConfig: CountConfig{Copies: "overlay", Allocs: "allocspy", Syscalls: "proc-io"}}}
	res, err := AB(context.Background(), cfg, nil)
	checkNoOrphans(t)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		t.Fatal(err)
	}
	if res.Before["go"] != cfg.BeforeGo || res.After["go"] != cfg.AfterGo {
		t.Fatalf("arms built by %q and %q, want %s and %s", res.Before["go"], res.After["go"], cfg.BeforeGo, cfg.AfterGo)
	}
	s := res.Scopes["allocs"]
	if s == nil || s[ScopeUser] != 0 {
		t.Errorf("allocs by scope %v: the user's code did not change", s)
	}
	for _, f := range res.Functions {
		if f.Key == "main.orders" {
			t.Errorf("main.orders moved: %+v", f)
		}
	}
	rep := readFile(t, filepath.Join(out, "report.md"))
	if !strings.Contains(rep, cfg.BeforeGo) || !strings.Contains(rep, cfg.AfterGo) || !strings.Contains(rep, "Whose code changed") {
		t.Errorf("report.md does not name both toolchains and the scopes:\n%s", rep)
	}
	t.Logf("allocs/req %v -> %v; by scope %v", res.Metrics["allocs/req"].Before, res.Metrics["allocs/req"].After, s)
}

// TestArmWorkdir: an arm's target runs in probe's own folder as it lies in
// the arm's worktree (a server's relative data files are its revision's),
// in the worktree's root when probe runs outside the repository, and in
// probe's own folder with no worktree.
func TestArmWorkdir(t *testing.T) {
	repo, wt, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(repo, "srv", "data"), filepath.Join(wt, "srv", "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ab := &abRun{root: repo, dirs: map[string]string{"before": "", "after": wt}}
	for _, c := range []struct{ cwd, want string }{
		{filepath.Join(repo, "srv"), filepath.Join(wt, "srv")},
		{repo, wt},
		{elsewhere, wt},
	} {
		t.Chdir(c.cwd)
		if got := ab.workdir("after"); got != c.want {
			t.Errorf("probe in %s: the after arm runs in %s, want %s", c.cwd, got, c.want)
		}
		if got := ab.workdir("before"); got != "" {
			t.Errorf("no worktree: %q, want probe's own folder", got)
		}
	}
}

// TestABHeadRewritesBase: a head whose init() rewrites the base's
// checkout (found beside its own, as a hostile head finds it) so that the
// base's later rounds build a costlier base, cannot turn its regression
// into an improvement: the base's files are pinned before any code runs,
// and the round that would build from them is refused, naming the file.
func TestABHeadRewritesBase(t *testing.T) {
	skipShort(t)
	r := newTestRepo(t, "example.com/abhostile")
	base := r.commit(abServer, "base")
	evil := strings.Replace(abServer, "//EXTRA", `//go:noinline
func extraAlloc() { sink = make([]byte, 64) }

func init() {
	f := filepath.Join("..", "before", "server", "main.go")
	if b, err := os.ReadFile(f); err == nil {
		os.WriteFile(f, bytes.Replace(b, []byte("spin()\n"), []byte("spin(); sink = make([]byte, 9000)\n"), 1), 0o644)
	}
}`, 1)
	evil = strings.Replace(evil, "//CALL", "extraAlloc()", 1)
	evil = strings.Replace(evil, "import (\n", "import (\n\t\"bytes\"\n\t\"path/filepath\"\n", 1)
	head := r.commit(evil, "head: one more allocation, and a base made costlier")
	cfg := abConfig(r.dir, base, head, filepath.Join(t.TempDir(), "ab"))
	cfg.Rounds = 2
	res, err := AB(context.Background(), cfg, nil)
	checkNoOrphans(t)
	if res != nil {
		if m := res.Metrics["B/req"]; m != nil {
			t.Logf("B/req %.1f -> %.1f, %s", m.Before, m.After, m.Verdict)
		}
	}
	if !errors.Is(err, worktree.ErrChanged) || !strings.Contains(err.Error(), "server/main.go (rewritten)") || !strings.Contains(err.Error(), "the before revision") {
		t.Fatalf("error %v; want the base's server/main.go named as rewritten", err)
	}
	t.Log(err)
}
