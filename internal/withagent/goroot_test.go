package withagent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeToolchain is a small GOROOT as the module cache holds one: files
// read-only.
func fakeToolchain(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "golang.org", "toolchain@v0.0.1-go1.27.3.linux-amd64")
	for name, text := range map[string]string{"VERSION": "go1.27.3\n", "bin/go": "#!/bin/sh\n", "src/runtime/malloc.go": "package runtime\n"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestPrivateGOROOT: the private copy holds the module cache's files (the
// same files), its go command leads the build's PATH with
// GOTOOLCHAIN=local, and a copy that was changed or grew a file is made
// anew, never believed.
func TestPrivateGOROOT(t *testing.T) {
	src, cacheDir := fakeToolchain(t), t.TempDir()
	env, dst, err := privateGOROOT(src, "go1.27.3", cacheDir, []string{"PATH=/usr/bin", "GOTOOLCHAIN=go1.27.3", "HOME=/h"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cacheDir, "goroot", "go1.27.3.linux-amd64"); dst != want {
		t.Errorf("copy at %s, want %s", dst, want)
	}
	if !slices.Contains(env, "GOTOOLCHAIN=local") || slices.Contains(env, "GOTOOLCHAIN=go1.27.3") || !slices.Contains(env, "HOME=/h") {
		t.Errorf("env %q", env)
	}
	if got := lookGo(env); got != filepath.Join(dst+".bin", "go") {
		t.Errorf("the go command is %s, want the copy's", got)
	}
	if target, _ := os.Readlink(lookGo(env)); target != filepath.Join(dst, "bin", "go") {
		t.Errorf("bin/go -> %s", target)
	}
	if err := checkCopy(src, dst); err != nil {
		t.Fatalf("fresh copy: %v", err)
	}
	a, _ := os.Stat(filepath.Join(src, "src/runtime/malloc.go"))
	b, _ := os.Stat(filepath.Join(dst, "src/runtime/malloc.go"))
	if !os.SameFile(a, b) {
		t.Error("the copy's files are not the module cache's (hard links)")
	}
	// A file added beside the runtime, or one replaced, is a change.
	added := filepath.Join(dst, "src/runtime/zz_planted.go")
	if err := os.WriteFile(added, []byte("package runtime\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkCopy(src, dst); !errors.Is(err, errChanged) {
		t.Fatalf("a planted file: %v", err)
	}
	if _, _, err := privateGOROOT(src, "go1.27.3", cacheDir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(added); !os.IsNotExist(err) {
		t.Error("the planted file survived: the changed copy was believed")
	}
	malloc := filepath.Join(dst, "src/runtime/malloc.go")
	os.Remove(malloc)
	if err := os.WriteFile(malloc, []byte("package runtime // edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkCopy(src, dst); err == nil || !strings.Contains(err.Error(), "malloc.go") {
		t.Fatalf("an edited file: %v", err)
	}
}

func TestBeneath(t *testing.T) {
	for _, c := range []struct {
		path, dir string
		want      bool
	}{
		{"/root/go/pkg/mod/golang.org/toolchain@v0.0.1-go1.27.3.linux-amd64", "/root/go/pkg/mod", true},
		{"/usr/local/go", "/root/go/pkg/mod", false},
		{"/root/go/pkg/modx/a", "/root/go/pkg/mod", false},
		{"/root/go/pkg/mod", "", false},
	} {
		if got := beneath(c.path, c.dir); got != c.want {
			t.Errorf("beneath(%q, %q) = %v", c.path, c.dir, got)
		}
	}
}
