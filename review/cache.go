package review

// The cache of base revisions' rounds: exact counts of one commit do not
// change between two runs with the same toolchain, configuration and
// perfspy, so a second push to the same pull request measures only its
// head (with -timings=false).

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/probe"
)

// cacheKey names a base revision's rounds of one item: its commit, the
// Go version, the configuration's bytes, perfspy's version and the item.
func cacheKey(ctx context.Context, commit string, cfg *Config, item string) (string, error) {
	v, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	parts := []string{commit, strings.TrimSpace(string(v)), cfg.hash, cmdmain.Version(), item}
	return fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join(parts, "\x00"))))[:32], nil
}

// cacheLookup returns the rounds kept under key, and where the base's
// sources were when they were measured.
func cacheLookup(dir, key string) (runs []string, worktree string, ok bool) {
	entry := filepath.Join(dir, key)
	wt, err := os.ReadFile(filepath.Join(entry, "worktree"))
	if err != nil {
		return nil, "", false
	}
	ents, err := os.ReadDir(filepath.Join(entry, "runs"))
	if err != nil {
		return nil, "", false
	}
	for _, e := range ents {
		if e.IsDir() {
			runs = append(runs, filepath.Join(entry, "runs", e.Name()))
		}
	}
	slices.Sort(runs)
	return runs, strings.TrimSpace(string(wt)), len(runs) > 0
}

// cacheStore keeps ab's before rounds under key, whole or not at all.
func cacheStore(dir, key string, ab *probe.ABResult) error {
	entry := filepath.Join(dir, key)
	if _, err := os.Stat(entry); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	runs, err := filepath.Glob(filepath.Join(ab.Dir, "runs", "*-before"))
	if err != nil || len(runs) == 0 {
		return err
	}
	for _, r := range runs {
		if err := copyTree(r, filepath.Join(tmp, "runs", filepath.Base(r))); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "worktree"), []byte(ab.Worktrees["before"]+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, entry); err != nil && !os.IsExist(err) {
		return err
	}
	return nil
}

// copyTree copies a folder's regular files.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
