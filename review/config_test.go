package review

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// configRoot is a repository folder with a server and a package.
func configRoot(t *testing.T) string {
	root := t.TempDir()
	for _, f := range []string{"cmd/api/main.go", "internal/codec/codec.go", "perf/requests.txt"} {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("package x\n"), 0o644)
	}
	return root
}

func TestLoadConfig(t *testing.T) {
	root := configRoot(t)
	good := `servers:
  - name: api
    target: ./cmd/api
    requests: perf/requests.txt
    conns: 4
    duration: 2s
  - target: ./cmd/api
    name: json
    path: /json
    args: -x 1
benchmarks:
  - package: ./internal/codec
    bench: 'Benchmark(Encode|Decode)$'
    benchtime: 2000x
    instructions: true
gates:
  allocs/req: 0%
  B/req: 1%
  allocs/op: 0%
  instructions/req: 0.5%
  instructions/op: 0.5%
rounds: 2
`
	path := filepath.Join(root, ConfigFile)
	os.WriteFile(path, []byte(good), 0o644)
	c, err := LoadConfig(path, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Servers) != 2 || c.Servers[0].Name != "api" || c.Servers[1].Name != "json" || c.Servers[0].Conns != 4 || c.Rounds != 2 {
		t.Errorf("servers %+v, rounds %d", c.Servers, c.Rounds)
	}
	if pct, gated := c.Gate("B/req"); pct != 1 || !gated {
		t.Errorf("B/req gate %v %v", pct, gated)
	}
	if pct, gated := c.Gate("copied-B/req"); pct != 0 || !gated {
		t.Errorf("copied-B/req (a count not named) gate %v %v, want 0 and gated", pct, gated)
	}
	if _, gated := c.Gate("cpu-us/req"); gated {
		t.Error("a timing not named is gated")
	}
	if !c.Benchmarks[0].Instructions {
		t.Error("benchmarks[0]: instructions: true not read")
	}
	if pct, gated := c.Gate("instructions/op"); pct != 0.5 || !gated {
		t.Errorf("instructions/op gate %v %v", pct, gated)
	}
}

// TestBadConfig: each mistake is refused with the file, the line and the
// key, before anything is built.
func TestBadConfig(t *testing.T) {
	root := configRoot(t)
	// A committed link to a folder outside the worktree, with a package.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		yaml, want string
		line       int
	}{
		{"servers:\n  - target: ./cmd/api\n    pth: /x\n", `unknown key "pth" in servers[0] (known: args, conns, data, duration, method, name, path, proto, requests, rounds, target, warmup)`, 3},
		{"servers:\n  - path: /x\n", "servers[0]: target is required", 2},
		{"servers:\n  - target: ./cmd/nope\n", "server nope: target ./cmd/nope: no Go package there", 2},
		{"servers:\n  - target: ./cmd/api\n    requests: perf/nope.txt\n", "requests perf/nope.txt: no such file or directory", 2},
		{"benchmarks:\n  - package: ./internal/codec\n    bench: 'Benchmark('\n", "benchmarks[0]: bench: error parsing regexp", 3},
		{"benchmarks:\n  - package: ./nope\n", "package ./nope: no Go package there", 2},
		{"benchmarks:\n  - package: ./internal/codec\ngates:\n  allocs/sec: 0%\n", `unknown key "allocs/sec" in gates`, 4},
		{"benchmarks:\n  - package: ./internal/codec\ngates:\n  allocs/op: lots\n", `gates: allocs/op: want an allowed growth like 0% or 1.5%, not "lots"`, 4},
		{"benchmarks:\n  - package: ./internal/codec\n    count: -1\n", `count: want a positive whole number, not "-1"`, 3},
		{"servers:\n  - target: ./cmd/api\n    warmup: soon\n", `warmup: want a duration like 2s or 500ms, not "soon"`, 3},
		{"benchmarks:\n  - package: ./internal/codec\n    instructions: 'yes'\n", `instructions: want true or false, not "yes"`, 3},
		{"servers: [\n", "", 0},
		{"", "empty: want servers:, benchmarks: or both", 0},
		{"gates:\n  allocs/req: 0%\n", "nothing to measure", 1},
		{"servers:\n  - target: ./cmd/api\n  - target: ./cmd/api\n", `a second server named "api"`, 3},
		{"servers:\n  - target: ./cmd/api\nservers: []\n", `key "servers" given twice`, 3},
		// Nothing outside the repository: no file of it read or printed.
		{"servers:\n  - target: ./cmd/api\n    requests: ../../../../../../../../etc/passwd\n", "../../../../../../../../etc/passwd: outside the repository", 2},
		{"servers:\n  - target: ./cmd/api\n    requests: /etc/passwd\n", "/etc/passwd: an absolute path", 2},
		{"servers:\n  - target: ./escape\n", "./escape: a symbolic link leads outside the repository", 2},
		{"servers:\n  - target: ./cmd/api\n    data: '@../../../../../../../etc/passwd'\n", "outside the repository", 2},
		{"benchmarks:\n  - package: ../..\n", "../..: outside the repository", 2},
		{"#" + strings.Repeat("x", MaxConfig) + "\nservers:\n  - target: ./cmd/api\n", "over 1048576 bytes", 0},
	} {
		path := filepath.Join(root, ConfigFile)
		os.WriteFile(path, []byte(c.yaml), 0o644)
		_, err := LoadConfig(path, root)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%q: err %v, want a *ConfigError", c.yaml, err)
			continue
		}
		if strings.Contains(err.Error(), "root:") {
			t.Errorf("%q: the error shows a line of a file outside the repository: %v", c.yaml, err)
		}
		if !strings.Contains(err.Error(), c.want) || ce.File != path || c.line > 0 && ce.Line != c.line || !strings.HasPrefix(err.Error(), path) {
			t.Errorf("%q:\n got %v (line %d)\nwant %q at line %d", c.yaml, err, ce.Line, c.want, c.line)
		}
	}
}

// TestConfigLinkedOut: a .perfspy.yml committed as a link to a file
// outside the repository is refused before it is read: no line of it
// reaches an error.
func TestConfigLinkedOut(t *testing.T) {
	root := configRoot(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("root:x:0:0:the first line\n"), 0o644)
	path := filepath.Join(root, ConfigFile)
	os.Remove(path)
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path, root)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "leads outside the repository") || strings.Contains(err.Error(), "root:") {
		t.Errorf("a configuration linked outside: %v", err)
	}
}

// FuzzConfig: any file is a configuration or a *ConfigError, never a
// panic.
func FuzzConfig(f *testing.F) {
	f.Add([]byte("servers:\n  - target: ./cmd/api\n    path: /x\ngates:\n  allocs/req: 0%\n"))
	f.Add([]byte("benchmarks: [{package: ., bench: x}]\n"))
	f.Add([]byte("gates: {B/op: 1.5%}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseConfig("f.yml", data)
		var ce *ConfigError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("error %v is not a *ConfigError", err)
		}
		if err == nil && len(c.Servers)+len(c.Benchmarks) == 0 {
			t.Fatal("a configuration with nothing to measure")
		}
	})
}

// TestMainBadConfig: probe review exits 2, naming the file and the line,
// before it builds anything (no results folder).
func TestMainBadConfig(t *testing.T) {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.commit(map[string]string{"go.mod": "module example.com/rv\n\ngo 1.26\n", "server/main.go": serverBase, ".perfspy.yml": "servers:\n  - target: ./server\n    rounds: many\n"}, "bad")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runReview(t, r.dir, "-base", "HEAD", "-out", out)
	if code != 2 || !strings.Contains(stderr, filepath.Join(r.dir, ".perfspy.yml")+`:3: rounds: want a positive whole number, not "many"`) {
		t.Errorf("exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a results folder was made")
	}
}

// TestCacheFolderChecked: -cache names the folder the base's counts are
// judged from: one another user can write, or a link, is refused before
// anything is measured, naming the flag.
func TestCacheFolderChecked(t *testing.T) {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.commit(map[string]string{"go.mod": "module example.com/rv\n\ngo 1.26\n", "server/main.go": serverBase, ".perfspy.yml": "servers:\n  - target: ./server\n"}, "base")
	open := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(t.TempDir(), link)
	for dir, want := range map[string]string{open: "is writable by group or others", link: "is a symbolic link"} {
		code, stdout, stderr := runReview(t, r.dir, "-base", "HEAD", "-cache", dir, "-out", filepath.Join(t.TempDir(), "out"))
		if code != 2 || !strings.Contains(stderr, "-cache: "+dir+" "+want) {
			t.Errorf("-cache %s: exit %d\n%s%s", dir, code, stdout, stderr)
		}
	}
}

// TestFIFOsRefused: a FIFO given as the configuration, or planted as the
// cache's record, is refused (or read as no record) before open(), which
// would wait for a writer deaf to signals.
func TestFIFOsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := readConfig(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
			t.Errorf("readConfig(FIFO): %v", err)
		}
		cache := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(cache, manifestName), 0o600); err != nil {
			t.Error(err)
			return
		}
		if c := openCache(cache); len(c.record) != 0 {
			t.Errorf("a FIFO record read as %v", c.record)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("blocked on a FIFO")
	}
}
