package worktree

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrChanged is a checkout whose files changed after they were pinned.
var ErrChanged = errors.New("a revision's inputs changed after they were pinned")

// Pins are a checkout's files as they were checked out, each regular
// file's hash (a link's target): code a revision runs (its init, a
// test's set-up) can write the other revision's checkout, which a later
// round would build from. Check tells such a change.
type Pins struct {
	dir   string
	files map[string][sha256.Size]byte
}

// Pin hashes every file under dir, .git aside.
func Pin(dir string) (*Pins, error) {
	files, err := hashTree(dir)
	if err != nil {
		return nil, fmt.Errorf("pinning %s: %w", dir, err)
	}
	return &Pins{dir: dir, files: files}, nil
}

// Check hashes dir again: a pinned file changed or gone, or a new file
// the go command builds from (Go, assembly, C, .syso, go.mod, go.sum,
// go.work, anything under vendor/), is an ErrChanged naming it. Other new
// files are what the program wrote where it runs (its logs, its data).
func (p *Pins) Check() error {
	now, err := hashTree(p.dir)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrChanged, p.dir, err)
	}
	var bad []string
	for _, f := range slices.Sorted(maps.Keys(p.files)) {
		if h, ok := now[f]; !ok {
			bad = append(bad, f+" (removed)")
		} else if h != p.files[f] {
			bad = append(bad, f+" (rewritten)")
		}
	}
	for _, f := range slices.Sorted(maps.Keys(now)) {
		if _, ok := p.files[f]; !ok && buildInput(f) {
			bad = append(bad, f+" (added)")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	if len(bad) > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
	}
	return fmt.Errorf("%w: in %s, %s: code that ran since (either revision's) wrote it; nothing is built from it", ErrChanged, p.dir, strings.Join(bad, ", "))
}

// buildInput says whether a file at rel (slash-separated) is one the go
// command reads to build.
func buildInput(rel string) bool {
	base := rel[strings.LastIndex(rel, "/")+1:]
	switch base {
	case "go.mod", "go.sum", "go.work", "go.work.sum":
		return true
	}
	switch filepath.Ext(base) {
	case ".go", ".s", ".S", ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".m", ".f", ".F", ".for", ".f90", ".swig", ".swigcxx", ".syso":
		return true
	}
	return strings.HasPrefix(rel, "vendor/") || strings.Contains(rel, "/vendor/")
}

// hashTree hashes every regular file and link under dir by its
// slash-separated path, .git (a worktree's link to its repository) aside.
func hashTree(dir string) (map[string][sha256.Size]byte, error) {
	files := map[string][sha256.Size]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files[rel] = sha256.Sum256([]byte("link:" + t))
		case d.Type().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			files[rel] = [sha256.Size]byte(h.Sum(nil))
		}
		return nil
	})
	return files, err
}
