package probe

// The git side of probe ab: the repository, and a worktree per arm.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
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
	wt, err := os.MkdirTemp("", "perfspy-ab-")
	if err != nil {
		return err
	}
	ab.undo = append(ab.undo, func() { os.RemoveAll(wt) })
	ab.dirs = map[string]string{}
	for _, arm := range []string{"before", "after"} {
		d := filepath.Join(wt, arm)
		if _, err := git(ctx, ab.root, "worktree", "add", "--detach", d, ab.shas[arm]); err != nil {
			return err
		}
		ab.undo = append(ab.undo, func() { git(context.Background(), ab.root, "worktree", "remove", "--force", d) })
		ab.dirs[arm] = d
	}
	return nil
}
