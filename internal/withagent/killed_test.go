package withagent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfspy/perfspy/internal/cache"
	"github.com/perfspy/perfspy/internal/owned"
)

// childEnv makes the test binary a build that the parent kills.
const childEnv = "PERFSPY_TEST_KILLED_BUILD"

// TestKilledBuildRemoved: a build killed by SIGKILL (a review killed
// mid-build) leaves its build folder in the cache; the next build removes
// it, and leaves a live build's folder alone.
func TestKilledBuildRemoved(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		// The child: build a program until killed.
		Build(context.Background(), dir, BuildOptions{}, func(string, ...any) {})
		return
	}
	if testing.Short() {
		t.Skip("skipped in -short: builds a program")
	}
	cacheDir := t.TempDir()
	t.Setenv(cache.Env, cacheDir)
	prog := t.TempDir()
	os.WriteFile(filepath.Join(prog, "go.mod"), []byte("module example.com/killed\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(prog, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)

	child := exec.Command(os.Args[0], "-test.run=^TestKilledBuildRemoved$")
	child.Env = append(os.Environ(), childEnv+"="+prog)
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var left string
	for deadline := time.Now().Add(2 * time.Minute); left == "" && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(cacheDir, buildPrefix+"*", owned.File))
		if len(m) > 0 {
			left = filepath.Dir(m[0])
		}
	}
	syscall.Kill(-child.Process.Pid, syscall.SIGKILL)
	child.Wait()
	if left == "" {
		t.Fatal("the child's build folder, claimed, never appeared")
	}
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("the killed build's folder %s: %v (SIGKILL runs no cleanup: it should be there)", left, err)
	}
	// A live build's folder (this process's) stays.
	live := filepath.Join(cacheDir, buildPrefix+"live")
	os.Mkdir(live, 0o700)
	if err := owned.Claim(live); err != nil {
		t.Fatal(err)
	}
	_, err := Build(context.Background(), filepath.Join(prog, "missing"), BuildOptions{}, t.Logf)
	if err == nil {
		t.Fatal("a build of a missing folder succeeded")
	}
	if _, err := os.Stat(left); err == nil {
		t.Errorf("the killed build's folder %s is still there after the next build", left)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live build's folder was removed: %v", err)
	}
	ents, _ := os.ReadDir(cacheDir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	t.Logf("the cache after the next build: %s", strings.Join(names, " "))
}
