package review

// The cache of base revisions' rounds: exact counts of one commit do not
// change between two runs with the same toolchain, configuration and
// perfspy, so a second push to the same pull request measures only its
// head (with -timings=false).

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/internal/limits"
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

// The cache's record: each entry's digest, written by the review that
// measured it. An entry whose bytes do not match (edited by hand, by
// another job, or by a pull request's code since) or that has no record
// is not used: its base is measured again and the entry replaced.
const manifestName = "manifest.json"

// cache is a review's view of -cache DIR: the record as it was when the
// review started, before any head's code ran, and what it adds.
type cache struct {
	dir    string
	record map[string]string // key -> digest
}

// maxManifest bounds the cache's record: a key and a digest per entry,
// kilobytes for thousands of entries.
const maxManifest = 4 << 20

// openCache reads dir's record; none (a new cache) is an empty one.
func openCache(dir string) *cache {
	c := &cache{dir: dir, record: map[string]string{}}
	// A record that is not a regular file (a FIFO, /dev/zero) or past its
	// bound is no record: every entry is measured again.
	if b, err := limits.ReadFile(filepath.Join(dir, manifestName), maxManifest, ""); err == nil {
		json.Unmarshal(b, &c.record)
	}
	return c
}

// digest hashes an entry: every regular file's path and bytes, in order.
func digest(entry string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(entry, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(entry, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(b))
		h.Write(b)
		return nil
	})
	return fmt.Sprintf("%x", h.Sum(nil)), err
}

// lookup returns the rounds kept under key, and where the base's sources
// were when they were measured; why says why an entry there is not used.
func (c *cache) lookup(key string) (runs []string, worktree, why string, ok bool) {
	entry := filepath.Join(c.dir, key)
	if _, err := os.Stat(entry); err != nil {
		return nil, "", "", false
	}
	if d, err := digest(entry); err != nil || d != c.record[key] {
		return nil, "", "its bytes do not match the cache's record (edited since this perfspy wrote it, or written by something else): measured again", false
	}
	wt, err := limits.ReadFile(filepath.Join(entry, "worktree"), 1<<16, "")
	if err != nil {
		return nil, "", "", false
	}
	ents, err := os.ReadDir(filepath.Join(entry, "runs"))
	if err != nil {
		return nil, "", "", false
	}
	for _, e := range ents {
		if e.IsDir() {
			runs = append(runs, filepath.Join(entry, "runs", e.Name()))
		}
	}
	slices.Sort(runs)
	return runs, strings.TrimSpace(string(wt)), "", len(runs) > 0
}

// store keeps ab's before rounds under key, whole or not at all,
// replacing what was there, and records their digest.
func (c *cache) store(key string, ab *probe.ABResult) error {
	dir := c.dir
	entry := filepath.Join(dir, key)
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
	d, err := digest(tmp)
	if err != nil {
		return err
	}
	if _, err := os.Stat(entry); err == nil {
		old := entry + ".old"
		os.RemoveAll(old)
		if err := os.Rename(entry, old); err != nil {
			return err
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, entry); err != nil {
		return err
	}
	c.record[key] = d
	b, _ := json.MarshalIndent(c.record, "", "  ")
	rec, err := os.CreateTemp(dir, ".manifest-")
	if err != nil {
		return err
	}
	defer os.Remove(rec.Name())
	if _, err := rec.Write(append(b, '\n')); err != nil {
		rec.Close()
		return err
	}
	if err := rec.Close(); err != nil {
		return err
	}
	return os.Rename(rec.Name(), filepath.Join(dir, manifestName))
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
