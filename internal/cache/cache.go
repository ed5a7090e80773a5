// Package cache is perfspy's private folder for built binaries, the agent
// module and copies of fetched modules. Whatever is in it may be compiled
// into a target and run, as root in CI, so only its owner may write it:
// it is created 0700, and a folder that another user owns, or that group
// or others may write, is refused on every use (docs/security.md).
package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Env names the variable that sets the cache folder.
const Env = "PERFSPY_CACHE"

// UnsafeError is a cache folder that another user could write.
type UnsafeError struct {
	Dir    string
	Reason string
	// Fix says what moves the folder: PERFSPY_CACHE for Dir's, the
	// user's cache folder's variables for UserDir's, which
	// PERFSPY_CACHE does not move.
	Fix string
}

func (e *UnsafeError) Error() string {
	fix := e.Fix
	if fix == "" {
		fix = "set " + Env + " to a folder of your own"
	}
	return fmt.Sprintf("cache folder %s %s: another user could put code in what probe builds and runs; remove it, or %s", e.Dir, e.Reason, fix)
}

// Dir returns the cache folder, created private when missing and checked
// on every call: $PERFSPY_CACHE, else the user's cache folder
// ($XDG_CACHE_HOME or $HOME/.cache)/perfspy, else $TMPDIR/perfspy-UID.
func Dir() (string, error) {
	if d := os.Getenv(Env); d != "" {
		return ensureAbs(d)
	}
	d, err := userDir()
	var ue *UnsafeError
	if errors.As(err, &ue) {
		ue.Fix = "set " + Env + " (or XDG_CACHE_HOME, or HOME) to a folder of your own"
	}
	return d, err
}

// UserDir is Dir without $PERFSPY_CACHE: the folder shared by every run
// of the user's (tests keep what takes minutes to build there).
func UserDir() (string, error) {
	d, err := userDir()
	var ue *UnsafeError
	if errors.As(err, &ue) && os.Getenv(Env) == "" {
		// Dir's folder too: PERFSPY_CACHE would move Dir's, not this.
		ue.Fix = "set XDG_CACHE_HOME (or HOME) so that its perfspy folder is one of your own"
	} else if errors.As(err, &ue) {
		ue.Fix = "set XDG_CACHE_HOME (or HOME) so that its perfspy folder is one of your own (" + Env + " does not move this one: it keeps the toolchains' private copies)"
	}
	return d, err
}

func userDir() (string, error) {
	if uc, err := os.UserCacheDir(); err == nil {
		return ensureAbs(filepath.Join(uc, "perfspy"))
	}
	// A name of the user's own, so that another user's folder is never
	// taken for it (it would be refused anyway).
	return ensureAbs(filepath.Join(os.TempDir(), "perfspy-"+strconv.Itoa(os.Geteuid())))
}

func ensureAbs(d string) (string, error) {
	d, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	return d, Ensure(d)
}

// Ensure creates dir 0700 (its parents as the user's umask allows) when
// missing, then checks it: a folder, not a symbolic link, owned by the
// effective user, and not writable by group or others.
func Ensure(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("cache folder: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cache folder: %w", err)
	}
	return Check(dir)
}

// Check refuses dir unless the effective user owns it, it is a real
// folder and neither group nor others may write it.
func Check(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("cache folder: %w", err)
	}
	switch {
	case st.Mode()&os.ModeSymlink != 0:
		return &UnsafeError{Dir: dir, Reason: "is a symbolic link"}
	case !st.IsDir():
		return &UnsafeError{Dir: dir, Reason: "is not a folder"}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return &UnsafeError{Dir: dir, Reason: fmt.Sprintf("belongs to uid %d, not to uid %d who runs probe", sys.Uid, os.Geteuid())}
	}
	if st.Mode().Perm()&0o022 != 0 {
		return &UnsafeError{Dir: dir, Reason: fmt.Sprintf("is writable by group or others (mode %04o)", st.Mode().Perm())}
	}
	return nil
}

// ReadTree reads the regular files under dir, by slash path relative to
// it. A symbolic link or other special file is an error: a copy in the
// cache holds none.
func ReadTree(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	return files, err
}

// Install makes dir hold exactly files (slash paths): a folder that
// already does is kept; any other (a half-written copy, a changed or an
// added file) is replaced. Files are compared byte for byte on every
// call, so nothing in the cache is trusted because it exists.
func Install(dir string, files map[string][]byte) error {
	if have, err := ReadTree(dir); err == nil && sameFiles(have, files) {
		return nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := WriteTree(tmp, files); err != nil {
		return err
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	defer os.RemoveAll(old)
	if err := os.Rename(tmp, dir); err != nil {
		// Another probe installed it in between: the same files, or
		// the next call replaces them.
		if have, err2 := ReadTree(dir); err2 == nil && sameFiles(have, files) {
			return nil
		}
		return err
	}
	return nil
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for n, x := range a {
		y, ok := b[n]
		if !ok || string(x) != string(y) {
			return false
		}
	}
	return true
}

// WriteTree writes files (slash paths) under dir, readable by their owner.
func WriteTree(dir string, files map[string][]byte) error {
	for n, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
