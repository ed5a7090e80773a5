package worktree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/owned"
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
	if err := os.WriteFile(filepath.Join(killed.Dir(), owned.File), []byte(strconv.Itoa(gone.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A worktree in a folder so named but not right in the temporary
	// folder (the list names it; the list is not believed) stays.
	elsewhere := filepath.Join(t.TempDir(), Prefix+"elsewhere", "src")
	if _, err := Git(ctx, root, "worktree", "add", "--detach", "--quiet", elsewhere, "HEAD"); err != nil {
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
	if _, err := os.Stat(elsewhere); err != nil {
		t.Errorf("a worktree outside the temporary folder was removed: %v", err)
	}
	if _, err := Git(ctx, root, "worktree", "remove", "--force", elsewhere); err != nil {
		t.Fatal(err)
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
