package probe

// The git side of probe ab: the repository, and a worktree per arm.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/worktree"
	"github.com/perfspy/perfspy/report"
)

// git runs git in dir (worktree.Git).
func git(ctx context.Context, dir string, args ...string) (string, error) {
	return worktree.Git(ctx, dir, args...)
}

// repoOf is the folder whose git repository holds the target: the
// target's own folder when it is one, else the working directory.
func repoOf(cfg ABConfig) string {
	t := cfg.Run.Target
	if cfg.Bench.Bench != "" {
		t = cfg.Bench.Target
	}
	if t == "" && cfg.Bench.Bench == "" {
		t = DefaultTarget
	}
	if st, err := os.Stat(t); err == nil && st.IsDir() {
		return t
	}
	return "."
}

// worktrees checks out each revision in a temporary worktree.
func (ab *abRun) worktrees(ctx context.Context) error {
	// A killed run's worktrees are removed here, the next time.
	set, err := worktree.New(ctx, ab.root, "ab")
	if err != nil {
		return err
	}
	ab.undo = append(ab.undo, func() { set.Remove() })
	ab.dirs = map[string]string{}
	for _, arm := range []string{"before", "after"} {
		d, err := set.Add(ctx, arm, ab.shas[arm])
		if err != nil {
			return err
		}
		ab.dirs[arm] = d
		// The revision's own tree, not the checkout's: a head that
		// commits the target's folder as a link to a folder elsewhere
		// would have it built and run.
		if err := insideTree(d, ab.rel); err != nil {
			return fmt.Errorf("the %s revision (%s): %w", arm, report.ShortCommit(ab.shas[arm]), err)
		}
		if err := worktree.CheckReplaces(d, filepath.Join(d, ab.rel)); err != nil {
			return fmt.Errorf("the %s revision (%s): %w", arm, report.ShortCommit(ab.shas[arm]), err)
		}
	}
	// Pinned once both are checked out, before any code of either runs.
	ab.pins = map[string]*worktree.Pins{}
	for _, arm := range []string{"before", "after"} {
		p, err := worktree.Pin(ab.dirs[arm])
		if err != nil {
			return err
		}
		ab.pins[arm] = p
	}
	return nil
}

// insideTree refuses rel when, its symbolic links followed in the
// worktree root, it leads outside root.
func insideTree(root, rel string) error {
	real, err := limits.Inside(root, rel)
	if errors.Is(err, limits.ErrOutside) {
		return fmt.Errorf("%s: a symbolic link leads outside the repository (to %s); refused", rel, real)
	}
	return nil // not there: the build says so
}
