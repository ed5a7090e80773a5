package probe

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/internal/agentmod"
	"github.com/perfspy/perfspy/internal/cache"
	"github.com/perfspy/perfspy/internal/owned"
	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/internal/worktree"
	"github.com/perfspy/perfspy/schema"
)

// depsOf reads the build list recorded in a binary: path -> version.
func depsOf(t *testing.T, binary string) map[string]string {
	t.Helper()
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, d := range bi.Deps {
		m[d.Path] = d.Version
	}
	return m
}

// plainBuild builds the main package in dir with a plain go build (the
// oracle: what the user ships) and returns its build list.
func plainBuild(t *testing.T, dir string, env ...string) map[string]string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "plain")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("plain go build in %s: %v\n%s", dir, err, out)
	}
	return depsOf(t, bin)
}

// sameBuildList checks that the measured binary has the plain build's
// modules at the plain build's versions, plus the agent module only.
func sameBuildList(t *testing.T, tgt *withagent.Binary, plain map[string]string) {
	t.Helper()
	got := depsOf(t, tgt.Binary)
	if _, ok := got[agentmod.Path]; !ok {
		t.Errorf("the measured binary has no %s module", agentmod.Path)
	}
	delete(got, agentmod.Path)
	for p, v := range plain {
		if got[p] != v {
			t.Errorf("%s: plain build %s, measured binary %q", p, v, got[p])
		}
	}
	for p, v := range got {
		if _, ok := plain[p]; !ok {
			t.Errorf("%s %s: in the measured binary only", p, v)
		}
	}
	c := tgt.BuildCheck
	if c == nil || withagent.CheckErr(c) != nil || len(c.Changed) != 0 || len(c.Added) != 1 || c.Added[0].Path != agentmod.Path {
		t.Errorf("build check %+v", c)
	}
}

// serveOnce starts a target that prints "listening on ADDR" and returns
// its answer to GET path.
func serveOnce(t *testing.T, binary, path string) string {
	t.Helper()
	cmd := exec.Command(binary)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", binary, err)
	}
	addr := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// requiredVersion reads the version of mod that gomod requires.
func requiredVersion(t *testing.T, gomod, mod string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(mod) + `\s+(v\S+)`).FindStringSubmatch(readFile(t, gomod))
	if m == nil {
		t.Fatalf("%s does not require %s", gomod, mod)
	}
	return m[1]
}

// TestBuildKeepsOlderModules builds a target that requires older versions
// of golang.org/x/net and golang.org/x/sys than perfspy does, with every
// instrument: the binary keeps the target's versions and behaves as the
// plain build does.
func TestBuildKeepsOlderModules(t *testing.T) {
	skipShort(t)
	// The test can only fail if perfspy itself requires other versions.
	for mod, old := range map[string]string{"golang.org/x/net": "v0.20.0", "golang.org/x/sys": "v0.16.0"} {
		if requiredVersion(t, "testdata/oldmods/go.mod", mod) != old {
			t.Fatalf("testdata/oldmods no longer requires %s %s", mod, old)
		}
		if v := requiredVersion(t, "../go.mod", mod); v == old {
			t.Fatalf("perfspy requires %s %s, as the fixture does: the test cannot fail", mod, v)
		}
	}
	tgt, err := withagent.Build(context.Background(), "./testdata/oldmods", withagent.BuildOptions{Copies: true, Allocs: true, Wallclock: true, Overlays: spyOverlays(seams{})}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if tgt.BuildMode != withagent.ModeModule {
		t.Errorf("build mode %q, want module", tgt.BuildMode)
	}
	plain := plainBuild(t, "testdata/oldmods")
	if plain["golang.org/x/net"] != "v0.20.0" || plain["golang.org/x/sys"] != "v0.16.0" {
		t.Fatalf("plain build list %v", plain)
	}
	sameBuildList(t, tgt, plain)
	// x/net v0.20.0 has the Unicode 15 tables; perfspy's x/net has 17.
	if body := serveOnce(t, tgt.Binary, "/"); !strings.HasPrefix(body, "idna 15.0.0 ") {
		t.Errorf("GET / = %q, want the old x/net's idna 15.0.0", body)
	}
}

// copyDir copies the files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	files, err := cache.ReadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WriteTree(dst, files); err != nil {
		t.Fatal(err)
	}
}

func goIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v in %s: %v\n%s", args, dir, err, out)
	}
}

// TestBuildVendored builds a target with a vendor/ folder: the build is in
// vendor mode (an edit of a vendored file shows in the binary), its
// versions are the vendored ones, and the target's tree is left as it was.
func TestBuildVendored(t *testing.T) {
	skipShort(t)
	dir := filepath.Join(t.TempDir(), "vendored")
	copyDir(t, "testdata/oldmods", dir)
	goIn(t, dir, "mod", "vendor")
	// Only a vendor-mode build sees this edit; the module cache has the
	// original file.
	tables := filepath.Join(dir, "vendor", "golang.org", "x", "net", "idna", "tables15.0.0.go")
	src := readFile(t, tables)
	edited := strings.Replace(src, `const UnicodeVersion = "15.0.0"`, `const UnicodeVersion = "15.0.0-vendored"`, 1)
	if edited == src {
		t.Fatalf("%s has no UnicodeVersion 15.0.0", tables)
	}
	if err := os.WriteFile(tables, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeList(t, dir)
	buildAndServe(t, dir, withagent.ModeVendor, "idna 15.0.0-vendored ")
	if after := treeList(t, dir); after != before {
		t.Errorf("probe changed the target's tree:\nbefore %s\nafter  %s", before, after)
	}
}

// buildAndServe builds the target in dir with the runtime overlays, checks
// the build mode and that its build list is a plain build's, and that GET /
// answers with want (which says which sources were built).
func buildAndServe(t *testing.T, dir, mode, want string) {
	t.Helper()
	tgt, err := withagent.Build(context.Background(), dir, withagent.BuildOptions{Copies: true, Allocs: true, Overlays: spyOverlays(seams{})}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if tgt.BuildMode != mode {
		t.Errorf("build mode %q, want %s", tgt.BuildMode, mode)
	}
	sameBuildList(t, tgt, plainBuild(t, dir))
	if body := serveOnce(t, tgt.Binary, "/"); !strings.HasPrefix(body, want) {
		t.Errorf("GET / = %q, want %q", body, want)
	}
}

// treeList lists the files under dir with their sizes.
func treeList(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d;", rel, fi.Mode(), fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestBuildWorkspace builds a target inside a go.work workspace whose
// other module the target imports without requiring it: only the
// workspace's versions can build it.
func TestBuildWorkspace(t *testing.T) {
	skipShort(t)
	ws := t.TempDir()
	app := filepath.Join(ws, "app")
	copyDir(t, "testdata/oldmods", app)
	files := map[string]string{
		"lib/go.mod": "module example.com/lib\n\ngo 1.22\n",
		"lib/lib.go": "package lib\n\nfunc Name() string { return \"lib-from-workspace\" }\n",
		"go.work":    "go 1.22\n\nuse (\n\t./app\n\t./lib\n)\n",
		"app/lib.go": "package main\n\nimport \"example.com/lib\"\n\nfunc init() { libName = lib.Name() }\n",
	}
	for name, src := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The handler prints libName after the idna version.
	main := readFile(t, filepath.Join(app, "main.go"))
	main = strings.Replace(main, `fmt.Fprintf(w, "idna %s uid %d\n", idna.UnicodeVersion, unix.Getuid())`, `fmt.Fprintf(w, "idna %s %s uid %d\n", idna.UnicodeVersion, libName, unix.Getuid())`, 1)
	main += "\nvar libName string\n"
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	buildAndServe(t, app, withagent.ModeWorkspace, "idna 15.0.0 lib-from-workspace ")
}

// TestNotMainPackage: a folder of another package, or of two, is named as
// such.
func TestNotMainPackage(t *testing.T) {
	two := t.TempDir()
	for name, src := range map[string]string{"go.mod": "module example.com/two\n", "a.go": "package a\n", "b.go": "package b\n"} {
		if err := os.WriteFile(filepath.Join(two, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for spec, want := range map[string]string{
		"../diff": "../diff is not a main package (package diff)",
		two:       two + " is not a main package (package a, b)",
	} {
		_, err := withagent.Build(context.Background(), spec, withagent.BuildOptions{}, t.Logf)
		var nm *withagent.NotMainError
		if !errors.As(err, &nm) || err.Error() != want {
			t.Errorf("Build(%s) = %v, want %q", spec, err, want)
		}
	}
}

// TestNoSourceTree runs a probe built with -trimpath (so it cannot find a
// perfspy source tree) from an empty folder with no PERFSPY_ROOT: the
// agent and the default target come from inside the binary.
func TestNoSourceTree(t *testing.T) {
	skipShort(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "probe")
	goIn(t, "..", "build", "-trimpath", "-o", bin, "./cmd/probe")
	work := filepath.Join(tmp, "elsewhere")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-q", "-duration", "1s", "-warmup", "300ms", "-offcpu=false", "-out", "out")
	cmd.Dir = work
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PERFSPY_ROOT=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == ExitNotJudged) {
		t.Fatalf("probe run: %v\n%s", err, out)
	}
	var s schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(work, "out", "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	if s.Build == nil || s.Build.Mode != withagent.ModeModule || withagent.CheckErr(s.Build) != nil {
		t.Errorf("build check %+v", s.Build)
	}
	p, err := readProfile(filepath.Join(work, "out", "allocs.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if objs, _ := siteCount(p, "main.buildDocument"); objs != requestsComment(t, p) {
		t.Errorf("main.buildDocument: %d allocations, want one per request", objs)
	}
}

// TestPublicServer probes Caddy, a public web server with well over twenty
// modules in its build, several of them shared with perfspy at other
// versions, given as module/cmd/x@version: its binary keeps Caddy's own
// versions and is measured.
func TestPublicServer(t *testing.T) {
	skipShort(t)
	const mod, version = "github.com/caddyserver/caddy/v2", "v2.11.9"
	dl := exec.Command("go", "mod", "download", "-json", mod+"@"+version)
	dl.Dir = t.TempDir()
	b, err := dl.Output()
	if err != nil {
		t.Skipf("the module proxy does not serve %s@%s here (%v): a public server cannot be fetched", mod, version, err)
	}
	var info struct{ GoMod string }
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	// quic-go is one of the modules the old build raised to perfspy's version.
	const shared = "github.com/quic-go/quic-go"
	want := requiredVersion(t, info.GoMod, shared)
	if mine := requiredVersion(t, "../go.mod", shared); mine == want {
		t.Fatalf("perfspy requires %s %s as Caddy does: pick another shared module", shared, mine)
	}
	out := filepath.Join(t.TempDir(), "out")
	// The build is what this test holds: the windows are short.
	code, stdout, stderr := probeRun(t, "-out", out, "-duration", "1s", "-exact-duration", "500ms", "-offcpu=false", "-retained=false",
		"-args", "respond --listen 127.0.0.1:0 --body hello", mod+"/cmd/caddy@"+version)
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var s schema.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	c := s.Build
	if c == nil || c.Modules < 20 || withagent.CheckErr(c) != nil || len(c.Changed) != 0 || len(c.Added) != 1 || c.Added[0].Path != agentmod.Path {
		t.Fatalf("build check %+v", c)
	}
	if got := depsOf(t, c.Binary)[shared]; got != want {
		t.Errorf("measured binary has %s %s, Caddy requires %s", shared, got, want)
	}
	if s.Window.Requests == 0 || s.Window.Errors+s.Window.Non2xx != 0 || s.PerRequest.Allocs == nil || *s.PerRequest.Allocs < 1 {
		t.Errorf("window %+v, allocs %v", s.Window, s.PerRequest.Allocs)
	}
	if !strings.Contains(stdout, "github.com/caddyserver/caddy/v2/") {
		t.Errorf("no Caddy function among the top allocation sites:\n%s", stdout)
	}
	t.Logf("%s", stdout)
}

// TestBinaryGoesWithCheckout: a target inside a revision's temporary
// checkout (a worktree set this process made, as probe ab, bisect and the
// review make) is built into the set's folder, removed with it, not into
// the cache's bin/ under a key of the random folder (a binary a run,
// 1 GB a day); a target elsewhere keeps its place in the cache.
func TestBinaryGoesWithCheckout(t *testing.T) {
	skipShort(t)
	set, err := os.MkdirTemp("", worktree.Prefix+"test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(set)
	if err := owned.Claim(set); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(set, "after", "server")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/inset\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	tgt, err := withagent.Build(context.Background(), dir, withagent.BuildOptions{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tgt.Binary, filepath.Join(set, ".bin")+string(filepath.Separator)) {
		t.Errorf("binary %s: want it in the set's folder %s", tgt.Binary, set)
	}
	// The same package outside any set: the cache's bin/.
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "go.mod"), []byte("module example.com/inset\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(out, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	if tgt, err = withagent.Build(context.Background(), out, withagent.BuildOptions{}, t.Logf); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(tgt.Binary, set) || !strings.Contains(tgt.Binary, string(filepath.Separator)+"bin"+string(filepath.Separator)) {
		t.Errorf("binary %s: want it in the cache's bin/", tgt.Binary)
	}
}
