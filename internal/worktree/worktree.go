// Package worktree checks revisions out into temporary git worktrees that
// a later run can clean up when the run that made them was killed: each
// worktree's temporary folder holds the owner's process id, and Add
// first removes the worktrees of the repository whose owner is gone.
package worktree

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/perfspy/perfspy/internal/owned"
)

// Prefix begins the name of every temporary folder that holds worktrees.
const Prefix = "perfspy-wt-"

// Git runs git in dir and returns its output, trimmed; an error carries
// what git said.
func Git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// Set is a temporary folder of worktrees of one repository.
type Set struct {
	root, dir string
	added     []string
}

// New removes the repository's worktrees whose owner is gone and makes
// a folder for this run's (what names it in the temporary folder).
func New(ctx context.Context, root, what string) (*Set, error) {
	if err := PruneStale(ctx, root); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", Prefix+what+"-")
	if err != nil {
		return nil, err
	}
	if err := owned.Claim(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Set{root: root, dir: dir}, nil
}

// Add checks commit out, detached, into the folder name of the set and
// returns its path.
func (s *Set) Add(ctx context.Context, name, commit string) (string, error) {
	d := filepath.Join(s.dir, name)
	if _, err := Git(ctx, s.root, "worktree", "add", "--detach", "--quiet", d, commit); err != nil {
		return "", err
	}
	s.added = append(s.added, d)
	return d, nil
}

// SetOf returns the folder of the set, made by this process, that path
// lies in (a revision's checkout), "" when there is none: what is built
// for a checkout can go with it, removed with the set.
func SetOf(path string) string {
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Clean(path); filepath.Dir(d) != d; d = filepath.Dir(d) {
		if filepath.Dir(d) == tmp {
			if strings.HasPrefix(filepath.Base(d), Prefix) && owned.Mine(d) {
				return d
			}
			return ""
		}
	}
	return ""
}

// Dir is the set's folder.
func (s *Set) Dir() string { return s.dir }

// Remove removes the set's worktrees and its folder; it runs to the end
// even when the run's context was cancelled.
func (s *Set) Remove() error {
	var errs []error
	for _, d := range s.added {
		if _, err := Git(context.Background(), s.root, "worktree", "remove", "--force", d); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// PruneStale removes the worktrees of the repository at root that a run
// made and left behind when it was killed: those in a folder named with
// Prefix whose owner process is not running (or whose folder is gone).
// Another run's live worktrees are left alone.
func PruneStale(ctx context.Context, root string) error {
	list, err := Git(ctx, root, "worktree", "list", "--porcelain")
	if err != nil {
		return err
	}
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		path, ok := strings.CutPrefix(sc.Text(), "worktree ")
		if !ok {
			continue
		}
		// Only a folder New made: named so, right in the temporary folder.
		// The repository's worktree list is not believed further (code
		// under review runs and could write it), so a path it names
		// elsewhere is never removed.
		parent := filepath.Dir(path)
		if !strings.HasPrefix(filepath.Base(parent), Prefix) || filepath.Dir(parent) != filepath.Clean(os.TempDir()) || owned.Alive(parent) {
			continue
		}
		if _, err := Git(ctx, root, "worktree", "remove", "--force", path); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, os.RemoveAll(parent))
	}
	_, err = Git(ctx, root, "worktree", "prune")
	return errors.Join(append(errs, err)...)
}
