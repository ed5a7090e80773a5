package worktree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPruneStale: a run killed with its worktrees in place (its owner's
// process gone) loses them to the next run's New; a running owner's stay;
// Remove leaves nothing.
func TestPruneStale(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx := context.Background()
	root := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "one"}} {
		if _, err := Git(ctx, root, args...); err != nil {
			t.Fatal(err)
		}
	}
	killed, err := New(ctx, root, "test")
	if err != nil {
		t.Fatal(err)
	}
	stale, err := killed.Add(ctx, "before", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	// Its owner is a process that has ended.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(killed.Dir(), ownerFile), []byte(strconv.Itoa(gone.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := New(ctx, root, "test")
	if err != nil {
		t.Fatal(err)
	}
	mine, err := live.Add(ctx, "after", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := Git(ctx, root, "worktree", "list", "--porcelain")
	if strings.Contains(list, stale) {
		t.Errorf("the killed run's worktree %s is still listed:\n%s", stale, list)
	}
	if _, err := os.Stat(killed.Dir()); !os.IsNotExist(err) {
		t.Errorf("the killed run's folder %s is still there: %v", killed.Dir(), err)
	}
	// A second run beside this one keeps this one's worktree.
	if err := PruneStale(ctx, root); err != nil {
		t.Fatal(err)
	}
	if list, _ := Git(ctx, root, "worktree", "list", "--porcelain"); !strings.Contains(list, mine) {
		t.Errorf("a running owner's worktree %s was removed:\n%s", mine, list)
	}
	if err := live.Remove(); err != nil {
		t.Fatal(err)
	}
	if list, _ := Git(ctx, root, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("after Remove:\n%s", list)
	}
	if _, err := os.Stat(live.Dir()); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Remove: %v", live.Dir(), err)
	}
}
