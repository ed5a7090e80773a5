package probe

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/worktree"
)

// TestVerifyModules: a module whose copy in the module cache was
// rewritten after it was downloaded (a dependency's init that edits its
// own sources) is a worktree.ErrChanged naming it; untouched, it passes.
// The module comes from the machine's module cache, served as a file
// proxy to a module cache of the test's own.
func TestVerifyModules(t *testing.T) {
	real, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	t.Setenv("GOMODCACHE", cache)
	t.Setenv("GOPROXY", "file://"+filepath.Join(strings.TrimSpace(string(real)), "cache", "download"))
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	mod := t.TempDir()
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/v\n\ngo 1.26\n\nrequire github.com/HdrHistogram/hdrhistogram-go v1.4.0\n"), 0o644)
	os.WriteFile(filepath.Join(mod, "go.sum"), []byte("github.com/HdrHistogram/hdrhistogram-go v1.4.0 h1:JdU0squ73hT0G45GVKzZ8KXS8ImiFuPHAA36aWaCfMM=\ngithub.com/HdrHistogram/hdrhistogram-go v1.4.0/go.mod h1:CiIeGiHSd06zjX+FypuEJ5EQ07KKtxZ+8J6hszwVQig=\n"), 0o644)
	os.WriteFile(filepath.Join(mod, "main.go"), []byte("package main\n\nimport _ \"github.com/HdrHistogram/hdrhistogram-go\"\n\nfunc main() {}\n"), 0o644)
	dl := exec.Command("go", "mod", "download", "github.com/HdrHistogram/hdrhistogram-go")
	dl.Dir = mod
	if out, err := dl.CombinedOutput(); err != nil {
		t.Skipf("the module is not in this machine's module cache: %v: %s", err, out)
	}
	ctx := context.Background()
	if err := verifyModules(ctx, mod, "", ""); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	src := filepath.Join(cache, "github.com", "!hdr!histogram", "hdrhistogram-go@v1.4.0", "hdr.go")
	os.Chmod(filepath.Dir(src), 0o755)
	os.Chmod(src, 0o644)
	if err := os.WriteFile(src, []byte("package hdrhistogram // rewritten at init\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = verifyModules(ctx, filepath.Join(mod), "", "")
	if !errors.Is(err, worktree.ErrChanged) || !strings.Contains(err.Error(), "github.com/HdrHistogram/hdrhistogram-go v1.4.0") {
		t.Errorf("rewritten: %v", err)
	}
	t.Log(err)
	// Go's module cache is read-only: the test's own must be removable.
	filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
}

// TestModuleRoot: the go.mod above a target, no further than the
// checkout's root; none for a module path.
func TestModuleRoot(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "cmd", "srv"), 0o755)
	os.WriteFile(filepath.Join(root, "a", "go.mod"), []byte("module x\n"), 0o644)
	os.MkdirAll(filepath.Join(root, "b", "srv"), 0o755)
	for target, want := range map[string]string{
		filepath.Join(root, "a", "cmd", "srv"): filepath.Join(root, "a"),
		filepath.Join(root, "b", "srv"):        "",
		"example.com/x@v1.0.0":                 "",
	} {
		if got := moduleRoot(target, root); got != want {
			t.Errorf("moduleRoot(%s) = %q, want %q", target, got, want)
		}
	}
}
