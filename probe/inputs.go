package probe

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/perfspy/perfspy/internal/worktree"
)

// checkInputs refuses an arm whose inputs changed since they were pinned:
// its checkout's files (worktree.Pins) and the module cache's copies of the
// modules it builds (go mod verify). Code either revision runs (an init, a
// test's set-up, a dependency's) can write both, and the next round would
// build and measure what it wrote: probe ab calls it before each round and
// once all rounds ran, before anything is judged or a module's sources are
// read.
func (ab *abRun) checkInputs(ctx context.Context, arm string) error {
	if p := ab.pins[arm]; p != nil {
		if err := p.Check(); err != nil {
			return fmt.Errorf("the %s revision: %w", arm, err)
		}
	}
	if err := verifyModules(ctx, ab.target(arm), ab.dirs[arm], ab.toolchain(arm)); err != nil {
		return fmt.Errorf("the %s revision: %w", arm, err)
	}
	return nil
}

// verifyModules runs go mod verify in the module of target (a folder, up
// to stop): a module whose copy in the module cache no longer matches
// what was downloaded is a worktree.ErrChanged naming it. go mod verify's
// other failures (a module it cannot load) are not such a change: the
// build says what they are.
func verifyModules(ctx context.Context, target, stop, toolchain string) error {
	dir := moduleRoot(target, stop)
	if dir == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "verify")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if toolchain != "" {
		cmd.Env = append(cmd.Env, "GOTOOLCHAIN="+toolchain)
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	var changed []string
	for line := range bytes.Lines(out) {
		if l := strings.TrimSpace(string(line)); strings.Contains(l, "has been modified") {
			changed = append(changed, l)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the module cache's copy of a module it builds: %s (code that ran since wrote it); nothing is built or read from it", worktree.ErrChanged, strings.Join(changed, "; "))
}

// moduleRoot is the folder of the go.mod that holds target, looking up no
// further than stop ("" no limit); "" when there is none (a module path
// with a version, resolved by the go command).
func moduleRoot(target, stop string) string {
	dir, err := filepath.Abs(target)
	if err != nil {
		return ""
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir || stop != "" && dir == filepath.Clean(stop) {
			return ""
		}
		dir = parent
	}
}
