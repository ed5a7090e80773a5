package withagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The repeatable overlay patches the seed line of this Go's runtime/rand.go,
// the cache fills of iface.go and sysmon's wake-up on entering a system
// call in proc.go in place, and refuses a runtime of another shape.
func TestRepeatableOverlay(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	goroot := strings.TrimSpace(string(out))
	ov := map[string]string{}
	// A spy's proc.go (the request mark's) gets both edits.
	procPath := filepath.Join(goroot, "src", "runtime", "proc.go")
	proc, err := os.ReadFile(procPath)
	if err != nil {
		t.Fatal(err)
	}
	spied := filepath.Join(t.TempDir(), "proc.go")
	if err := os.WriteFile(spied, append([]byte("// SPIED"), proc...), 0o644); err != nil {
		t.Fatal(err)
	}
	spies := map[string]string{procPath: spied}
	if err := repeatableOverlay(ov, spies, goroot, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	both, err := os.ReadFile(spies[procPath])
	if err != nil || len(spies) != 1 || !strings.HasPrefix(string(both), "// SPIED") || !strings.Contains(string(both), "if false && sched.sysmonwait.Load()") {
		t.Errorf("the spies' proc.go lacks an edit (%v, %d files)", err, len(spies))
	}
	for _, tc := range []struct {
		file, want string
		count      int // of want in the patched file
		why        string
	}{
		{"rand.go", "seed[i] = byte(i + 1) }; globalRand.state.Init(*seed)\n", 1, "lacks the constant seed"},
		{"iface.go", "cheaprand()&0 != 0", 4, "keeps a random cache fill"},
		{"proc.go", "if false && sched.sysmonwait.Load() {\n\t\tsystemstack(entersyscallWakeSysmon)", 1, "still wakes sysmon on entering a system call"},
	} {
		path := filepath.Join(goroot, "src", "runtime", tc.file)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(ov[path])
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(got), "\n") != strings.Count(string(orig), "\n") {
			t.Errorf("the patched %s moves lines", tc.file)
		}
		if strings.Count(string(got), tc.want) != tc.count {
			t.Errorf("the patched %s %s", tc.file, tc.why)
		}
	}
	if len(ov) != 3 {
		t.Errorf("overlay %v: want rand.go, iface.go and proc.go", ov)
	}
	fake := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fake, "src", "runtime"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "src", "runtime", "rand.go"), []byte("package runtime\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := repeatableOverlay(map[string]string{}, map[string]string{}, fake, t.TempDir()); err == nil || !strings.Contains(err.Error(), "rand.go") {
		t.Errorf("a rand.go of another shape: %v", err)
	}
}

// TestProgramName: a program is named as go install names it.
func TestProgramName(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/oauth2-proxy/oauth2-proxy/v7":                   "oauth2-proxy",
		"github.com/mccutchen/go-httpbin/v2/cmd/go-httpbin":         "go-httpbin",
		"google.golang.org/grpc/examples/helloworld/greeter_server": "greeter_server",
		"github.com/x/vendor":                                       "vendor",
		"v2":                                                        "v2",
	} {
		if got := ProgramName(in); got != want {
			t.Errorf("ProgramName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMainOnlyDirectives(t *testing.T) {
	gomod := "module m\n\nrequire x v1\n\nreplace google.golang.org/grpc => ../ // the repository's root\n\nexclude (\n\ty v1.2.0\n)\n"
	got := mainOnlyDirectives([]byte(gomod))
	want := []string{"replace google.golang.org/grpc => ../", "exclude y v1.2.0"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	if d := mainOnlyDirectives([]byte("module m\n// replace x => y\n")); len(d) != 0 {
		t.Errorf("a comment taken for a directive: %q", d)
	}
}

// TestClearNonObject: what is planted where the build writes its binary
// (a text file, a folder) is removed, so that go build, which refuses to
// write over anything that is not an object file, builds there again; a
// Go executable stays.
func TestClearNonObject(t *testing.T) {
	dir := t.TempDir()
	text, folder, exe := filepath.Join(dir, "text"), filepath.Join(dir, "folder"), filepath.Join(dir, "exe")
	os.WriteFile(text, []byte("#!/bin/sh\necho planted\n"), 0o755)
	os.MkdirAll(filepath.Join(folder, "sub"), 0o755)
	self, err := os.ReadFile(os.Args[0]) // this test binary: a Go executable
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(exe, self, 0o755)
	for _, p := range []string{text, folder, exe, filepath.Join(dir, "absent")} {
		if err := clearNonObject(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	for p, want := range map[string]bool{text: false, folder: false, exe: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: there %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}
