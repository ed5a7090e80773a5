package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// bisectServer is a server whose handler makes n allocations of 64 B in
// main.work, n a constant of n.go.
const bisectServer = `package main

import (
	"log"
	"net"
	"net/http"
)

var sink [16]*[64]byte

//go:noinline
func work() {
	for i := 0; i < n; i++ {
		sink[i] = new([64]byte)
	}
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		work()
		w.Write([]byte("ok"))
	})))
}
`

// bisectHistory makes a repository of a server and 16 commits after its
// first: commit 11 raises its allocations per request from 3 to 4, commit
// 8 (the first step's) does not build, and every other commit changes a
// comment. It returns
// the repository and the commits, oldest first (index 0 the first).
func bisectHistory(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	run := gitRepo(t, dir)
	write := writeIn(t, dir)
	run("init", "-q", "-b", "main")
	write("go.mod", "module example.com/bisected\n\ngo 1.26\n")
	write("main.go", bisectServer)
	write("n.go", "package main\n\nconst n = 3\n")
	run("add", ".")
	run("commit", "-q", "-m", "a server of 3 allocations a request")
	commits := []string{run("rev-parse", "HEAD")}
	for i := 1; i <= 16; i++ {
		msg := fmt.Sprintf("commit %d: a comment", i)
		switch i {
		case 8:
			write("broken.go", "package main\n\nfunc broken() { undefined() }\n")
			msg = "commit 8: does not build"
		case 9:
			os.Remove(filepath.Join(dir, "broken.go"))
			msg = "commit 9: builds again"
		case 11:
			write("n.go", "package main\n\nconst n = 4\n")
			msg = "commit 11: one allocation more"
		default:
			write("note.go", fmt.Sprintf("package main\n\n// note %d\n", i))
		}
		run("add", "-A")
		run("commit", "-q", "-m", msg)
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	return dir, commits
}

// TestBisect: of 16 commits, the one that adds an allocation a request is
// named, with the figure before and after and main.work as what moved,
// in a few counted runs; the commit that does not build is skipped.
func TestBisect(t *testing.T) {
	skipShort(t)
	repo, commits := bisectHistory(t)
	cfg := Config{TargetConfig: TargetConfig{Target: repo}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: time.Second, ExactDuration: time.Second}, CountConfig: CountConfig{NoBills: true, Copies: "off"}}
	start := time.Now()
	res, err := Bisect(context.Background(), BisectConfig{Good: commits[0], Bad: commits[16], Metric: "allocs/req", Run: cfg, Out: filepath.Join(t.TempDir(), "out")}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d steps in %s", len(res.Steps), time.Since(start).Round(time.Second))
	if res.First == nil || res.First.Commit != commits[11] || res.Before == nil || res.Before.Commit != commits[10] {
		t.Fatalf("first %+v, before %+v; want commit 11 %s after commit 10", res.First, res.Before, commits[11])
	}
	// net/http's own allocations are in both; a sync.Pool's refill after
	// a GC moves the figure by hundredths.
	if d := *res.First.Value - *res.Before.Value; d < 0.95 || d > 1.05 {
		t.Errorf("allocs/req %.4f before, %.4f after: want one more a request", *res.Before.Value, *res.First.Value)
	}
	if len(res.Functions) == 0 || res.Functions[0].Key != "main.work" || res.Functions[0].Delta < 0.99 || res.Functions[0].Delta > 1.01 {
		t.Errorf("functions %+v: want main.work +1 a request first", res.Functions)
	}
	// log2 of 16 steps, and the two ends: a step more at most for the
	// broken build.
	if len(res.Steps) > 7 {
		t.Errorf("%d steps, want at most 7", len(res.Steps))
	}
	skipped := false
	for _, s := range res.Steps {
		if s.Commit == commits[8] {
			skipped = s.Value == nil && strings.Contains(s.Skipped, "build failed")
		}
	}
	if !skipped {
		t.Errorf("commit 8 (does not build, the first step): not skipped in %d steps", len(res.Steps))
	}
	var back BisectResult
	raw, err := os.ReadFile(filepath.Join(res.Dir, "bisect.json"))
	if err != nil || json.Unmarshal(raw, &back) != nil || back.Schema != BisectSchema || back.First.Commit != commits[11] {
		t.Errorf("bisect.json: %v %s", err, raw)
	}
	if md, _ := os.ReadFile(filepath.Join(res.Dir, "report.md")); !strings.Contains(string(md), "First bad commit: `"+commits[11][:12]+"`") {
		t.Errorf("report.md:\n%s", md)
	}
	// No change between two good commits: not judged, and said so.
	_, err = Bisect(context.Background(), BisectConfig{Good: commits[0], Bad: commits[5], Metric: "allocs/req", Run: cfg, Out: filepath.Join(t.TempDir(), "out2")}, nil)
	if err == nil || !strings.Contains(err.Error(), "no change") {
		t.Errorf("good and bad alike: %v, want not judged", err)
	}
}

// TestBisectFlags: probe bisect's usage errors name the flag.
func TestBisectFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bad", "HEAD", "."}, "-good and -bad are required"},
		{[]string{"-good", "HEAD~1", "-bad", "HEAD", "-metric", "p99-us", "."}, "-metric p99-us: want an exact count"},
		{[]string{"-good", "HEAD~1", "-bad", "HEAD", "-metric", "allocs/op", "."}, "a server's figures are .../req"},
	} {
		var stderr strings.Builder
		if _, _, code, ok := parseBisectFlags(tc.args, &stderr); ok || code != ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: ok %v, exit %d, %q; want usage naming %q", tc.args, ok, code, stderr.String(), tc.want)
		}
	}
	bc, _, _, ok := parseBisectFlags([]string{"-good", "a", "-bad", "b", "."}, &strings.Builder{})
	if !ok || bc.Metric != "allocs/req" || bc.Run.Duration != time.Second || bc.Run.OffCPU || bc.Run.Retained || !bc.Run.NoBills {
		t.Errorf("defaults %+v: want allocs/req over 1 s windows that only count", bc)
	}
}

// TestBisectReplaceOutside: a commit in the range whose go.mod replaces a
// module with a folder outside its tree is skipped, refused with go.mod's
// line, and never built; the bisection goes on around it.
func TestBisectReplaceOutside(t *testing.T) {
	skipShort(t)
	lib, marker := outsideLib(t)
	dir, _ := bisectHistory(t)
	run := gitRepo(t, dir)
	good := run("rev-parse", "HEAD")
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	os.WriteFile(filepath.Join(dir, "go.mod"), append(slices.Clone(gomod), []byte("\nrequire example.com/shared v0.0.0\n\nreplace example.com/shared => "+lib+"\n")...), 0o644)
	os.WriteFile(filepath.Join(dir, "shared.go"), []byte("package main\n\nimport _ \"example.com/shared\"\n"), 0o644)
	run("add", "-A")
	run("commit", "-q", "-m", "a shared library, from a folder elsewhere")
	refused := run("rev-parse", "HEAD")
	os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644)
	os.Remove(filepath.Join(dir, "shared.go"))
	run("add", "-A")
	run("commit", "-q", "-m", "without it")
	os.WriteFile(filepath.Join(dir, "n.go"), []byte("package main\n\nconst n = 5\n"), 0o644)
	run("add", "-A")
	run("commit", "-q", "-m", "one allocation more")
	bad := run("rev-parse", "HEAD")
	cfg := Config{TargetConfig: TargetConfig{Target: dir}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: time.Second, ExactDuration: time.Second}, CountConfig: CountConfig{NoBills: true, Copies: "off"}}
	res, err := Bisect(context.Background(), BisectConfig{Good: good, Bad: bad, Metric: "allocs/req", Run: cfg, Out: filepath.Join(t.TempDir(), "out")}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range res.Steps {
		if s.Commit == refused {
			found = true
			if s.Value != nil || !strings.Contains(s.Skipped, "refused") || !strings.Contains(s.Skipped, "go.mod:7: "+lib+" leads outside") {
				t.Errorf("the commit with the outside replace: value %v, skipped %q", s.Value, s.Skipped)
			}
		}
	}
	if !found {
		t.Errorf("the commit with the outside replace was not a step: %+v", res.Steps)
	}
	if res.First == nil || res.First.Commit != bad {
		t.Errorf("first bad %+v, want %s", res.First, bad)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the outside folder's code ran")
	}
}

// gitRepo runs git in dir, with a fixed author, and returns its output.
func gitRepo(t *testing.T, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
}

// writeIn writes a file of dir.
func writeIn(t *testing.T, dir string) func(name, text string) {
	return func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBisectMerges: merges on the first-parent line.
//
// An "update branch" merge (the main line merged into a branch): the
// main line made the server one allocation cheaper, the branch's first
// commit changes a comment on the older code, and its last adds the
// allocation back. Bisected from the main line's commit to the branch's
// head, the comment-only commit (which lacks what good has) is not a
// step; the last commit is named.
//
// A branch merged into the main line: the merge is the first bad commit
// of the first-parent line, and the commit of the branch that added the
// allocation is named, merged by it.
func TestBisectMerges(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	run := gitRepo(t, dir)
	write := writeIn(t, dir)
	commit := func(msg string) string {
		t.Helper()
		run("add", "-A")
		run("commit", "-q", "-m", msg)
		return run("rev-parse", "HEAD")
	}
	allocs := func(n int) { write("n.go", fmt.Sprintf("package main\n\nconst n = %d\n", n)) }
	run("init", "-q", "-b", "main")
	write("go.mod", "module example.com/bisected\n\ngo 1.26\n")
	write("main.go", bisectServer)
	allocs(4)
	base := commit("a server of 4 allocations a request")
	allocs(3)
	cheaper := commit("main: one allocation fewer")
	run("checkout", "-q", "-b", "feature", base)
	write("note.go", "package main\n\n// a note\n")
	commentOnly := commit("feature: a comment")
	run("merge", "-q", "--no-edit", "main")
	update := run("rev-parse", "HEAD")
	allocs(4)
	regress := commit("feature: one allocation more")

	// A branch merged into the main line: side commits s1 (comment), s2
	// (one allocation more), s3 (comment).
	run("checkout", "-q", "main")
	write("main_note.go", "package main\n\n// main's note\n")
	commit("main: a comment")
	run("checkout", "-q", "-b", "side", "main")
	write("side.go", "package main\n\n// side 1\n")
	commit("side: a comment")
	allocs(4)
	sideBad := commit("side: one allocation more")
	write("side.go", "package main\n\n// side 3\n")
	commit("side: another comment")
	run("checkout", "-q", "main")
	run("merge", "-q", "--no-ff", "--no-edit", "side")
	merge := run("rev-parse", "HEAD")
	write("main_note.go", "package main\n\n// main's note, again\n")
	mainBad := commit("main: a comment after the merge")

	cfg := Config{TargetConfig: TargetConfig{Target: dir}, WindowConfig: WindowConfig{Warmup: 200 * time.Millisecond, Duration: 700 * time.Millisecond, ExactDuration: 700 * time.Millisecond}, CountConfig: CountConfig{NoBills: true, Copies: "off"}}
	res, err := Bisect(context.Background(), BisectConfig{Good: cheaper, Bad: regress, Metric: "allocs/req", Run: cfg, Out: filepath.Join(t.TempDir(), "out")}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(res.Commits, commentOnly) || !slices.Equal(res.Commits, []string{update, regress}) {
		t.Errorf("commits %v: want the update merge %s and %s, not the comment-only %s from before it", res.Commits, update, regress, commentOnly)
	}
	if res.First == nil || res.First.Commit != regress || res.Before == nil || res.Before.Commit != update || res.Merge != nil {
		t.Errorf("first %+v, before %+v, merge %+v: want %s after the update merge", res.First, res.Before, res.Merge, regress)
	}

	res, err = Bisect(context.Background(), BisectConfig{Good: cheaper, Bad: mainBad, Metric: "allocs/req", Run: cfg, Out: filepath.Join(t.TempDir(), "out2")}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Merge == nil || res.Merge.Commit != merge || res.First == nil || res.First.Commit != sideBad || len(res.Merged) != 3 {
		t.Fatalf("merge %+v, first %+v, merged %v: want %s, merged by %s", res.Merge, res.First, res.Merged, sideBad, merge)
	}
	if d := *res.First.Value - *res.Before.Value; d < 0.95 || d > 1.05 {
		t.Errorf("allocs/req %.4f before, %.4f after: want one more a request", *res.Before.Value, *res.First.Value)
	}
	if len(res.Functions) == 0 || res.Functions[0].Key != "main.work" {
		t.Errorf("functions %+v: want main.work first", res.Functions)
	}
	if md, _ := os.ReadFile(filepath.Join(res.Dir, "report.md")); !strings.Contains(string(md), "First bad commit: `"+sideBad[:12]+"`** side: one allocation more (merged by `"+merge[:12]+"`") {
		t.Errorf("report.md:\n%s", md)
	}
}

// TestBisectGoBump: a range whose middle commit moves go.mod's go line
// to a release the machine's go (GOTOOLCHAIN=local in its go.env) is not
// is bisected with no setting: each commit is built by the toolchain it
// asks for, and the commit that adds an allocation an op is named, at
// the module's function that asked the standard library for it.
func TestBisectGoBump(t *testing.T) {
	skipShort(t)
	if os.Getenv("GOTOOLCHAIN") != "" {
		t.Skip("GOTOOLCHAIN is set: the user's choice is kept, so this test's premise does not hold")
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=perfspy test", "-c", "user.email=test@perfspy.invalid"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q", "-b", "main")
	write("go.mod", "module example.com/bump\n\ngo 1.26\n")
	write("b.go", "package bump\n\nvar Sink []byte\n\nfunc Work() { Sink = make([]byte, 8) }\n")
	write("b_test.go", "package bump\n\nimport \"testing\"\n\nfunc BenchmarkWork(b *testing.B) {\n\tfor b.Loop() {\n\t\tWork()\n\t}\n}\n")
	run("add", "-A")
	run("commit", "-q", "-m", "one allocation an op")
	commits := []string{run("rev-parse", "HEAD")}
	for i, step := range []struct{ file, src, msg string }{
		{"go.mod", "module example.com/bump\n\ngo 1.27.3\n", "go 1.27.3"},
		{"note.go", "package bump\n\n// A note.\n", "a comment"},
		{"b.go", "package bump\n\nimport \"strings\"\n\nvar (\n\tSink []byte\n\tKept string\n)\n\nfunc Work() { Sink, Kept = make([]byte, 8), strings.Repeat(\"ab\", 8) }\n", "strings.Repeat too"},
		{"note.go", "package bump\n\n// A note, again.\n", "another comment"},
	} {
		write(step.file, step.src)
		run("add", "-A")
		run("commit", "-q", "-m", fmt.Sprintf("commit %d: %s", i+1, step.msg))
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	res, err := Bisect(context.Background(), BisectConfig{Good: commits[0], Bad: commits[4], Metric: "allocs/op",
		Bench: BenchConfig{Bench: "BenchmarkWork$", BenchTime: "200x", Target: dir, Copies: "off", Syscalls: "off"}, Out: filepath.Join(t.TempDir(), "out")}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if res.First == nil || res.First.Commit != commits[3] {
		t.Fatalf("first %+v, want commit 3 %s", res.First, commits[3])
	}
	for _, s := range res.Steps {
		if s.Value == nil {
			t.Errorf("commit %s skipped: %s", s.Commit[:12], s.Skipped)
		}
	}
	// strings.Repeat's allocation (in internal/bytealg) is named at the
	// module's function that called it.
	if len(res.Functions) == 0 || res.Functions[0].Key != "example.com/bump.Work" || res.Functions[0].Delta != 1 {
		t.Errorf("what moved: %+v, want example.com/bump.Work +1 an op", res.Functions)
	}
}
