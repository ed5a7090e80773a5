package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// ErrOutsideTree is a folder a revision would build from that is not in
// the revision's own tree.
var ErrOutsideTree = errors.New("outside the revision's tree")

// CheckReplaces refuses the revision checked out at root when the module
// that holds target (a folder under root), or the go.work above it, builds
// from a folder outside root: a replace with a folder (or a use in
// go.work) that leads out of the tree, by its path or through a link. A
// folder elsewhere is someone else's code (another user's, under the
// machine's temporary folder), which the build would compile and run with
// probe's rights. Each refused directive is named with its file and line.
func CheckReplaces(root, target string) error {
	top, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	var bad []string
	for d := dir; ; d = filepath.Dir(d) {
		if rel, err := filepath.Rel(root, d); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			break
		}
		for _, name := range []string{"go.mod", "go.work"} {
			f := filepath.Join(d, name)
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			bad = append(bad, outsideDirs(root, top, d, f, name, b)...)
		}
		if d == filepath.Clean(root) || filepath.Dir(d) == d {
			break
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s; refused, nothing is built", ErrOutsideTree, strings.Join(bad, "; "))
	}
	return nil
}

// outsideDirs lists the folders a go.mod or go.work (file f in folder d,
// its contents b) builds from that lead outside root (top, its real path).
func outsideDirs(root, top, d, f, name string, b []byte) []string {
	type dirAt struct {
		path string
		line int
	}
	var dirs []dirAt
	if name == "go.mod" {
		mf, err := modfile.Parse(f, b, nil)
		if err != nil {
			return nil // the build says what is wrong with it
		}
		for _, r := range mf.Replace {
			if r.New.Version == "" {
				dirs = append(dirs, dirAt{r.New.Path, r.Syntax.Start.Line})
			}
		}
	} else {
		wf, err := modfile.ParseWork(f, b, nil)
		if err != nil {
			return nil
		}
		for _, u := range wf.Use {
			dirs = append(dirs, dirAt{u.Path, u.Syntax.Start.Line})
		}
		for _, r := range wf.Replace {
			if r.New.Version == "" {
				dirs = append(dirs, dirAt{r.New.Path, r.Syntax.Start.Line})
			}
		}
	}
	relf, _ := filepath.Rel(root, f)
	var bad []string
	for _, p := range dirs {
		abs := p.path
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(d, abs)
		}
		if !inside(root, abs) {
			bad = append(bad, fmt.Sprintf("%s:%d: %s leads outside the revision's tree", filepath.ToSlash(relf), p.line, p.path))
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil && !inside(top, real) {
			bad = append(bad, fmt.Sprintf("%s:%d: %s is a link that leads outside the revision's tree (to %s)", filepath.ToSlash(relf), p.line, p.path, real))
		}
	}
	return bad
}

// inside says whether p, cleaned, is root or below it.
func inside(root, p string) bool {
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
