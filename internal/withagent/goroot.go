package withagent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/perfspy/perfspy/internal/cache"
)

// A toolchain the go command fetched (GOTOOLCHAIN, a go.mod toolchain
// line) lives in the module cache, where `go build -overlay` may not
// replace files. probe builds with a private GOROOT instead: the same
// files, hard-linked into the user's cache (a copy where links cannot
// cross file systems), reached by the go command as GOTOOLCHAIN=VERSION+path
// through a bin folder that holds only its go command. Links cost no disk
// and about 0.3 s the first time; a copy about 250 MB. Every use checks
// the tree against the module cache again, file for file.
//
// The go command that builds is the copy's bin/go, found first on the
// build's PATH (RunGo looks the go command up there), with
// GOTOOLCHAIN=local: it is the version the switch chose.

// beneath reports whether path lies inside dir.
func beneath(path, dir string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// privateGOROOT returns the env that builds with a private copy of goroot
// (a toolchain of version in the module cache), creating or checking the
// copy under cacheDir.
func privateGOROOT(goroot, version, cacheDir string, env []string) ([]string, string, error) {
	base := filepath.Join(cacheDir, "goroot")
	if err := cache.Ensure(base); err != nil {
		return nil, "", err
	}
	// golang.org/toolchain@v0.0.1-go1.27.3.linux-amd64
	name := filepath.Base(goroot)
	if _, rest, ok := strings.Cut(name, "@"); ok {
		name = rest[strings.Index(rest, "-")+1:]
	}
	dst := filepath.Join(base, name)
	bin := dst + ".bin"
	if err := checkCopy(goroot, dst); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			// A changed or partial copy is rebuilt, never believed.
			if err := os.RemoveAll(dst); err != nil {
				return nil, "", fmt.Errorf("private GOROOT %s: %w", dst, err)
			}
		}
		// Made aside and renamed into place: a run beside this one
		// either finds the whole copy or makes its own.
		tmp, err := os.MkdirTemp(base, name+".tmp-")
		if err != nil {
			return nil, "", err
		}
		defer os.RemoveAll(tmp)
		if err := linkTree(goroot, filepath.Join(tmp, "goroot")); err != nil {
			return nil, "", fmt.Errorf("private copy of the toolchain %s: %w", goroot, err)
		}
		if err := os.Rename(filepath.Join(tmp, "goroot"), dst); err != nil && !errors.Is(err, fs.ErrExist) && !isNotEmpty(err) {
			return nil, "", err
		}
		if err := checkCopy(goroot, dst); err != nil {
			return nil, "", fmt.Errorf("private GOROOT %s: %w", dst, err)
		}
	}
	want := filepath.Join(dst, "bin", "go")
	if got, err := os.Readlink(filepath.Join(bin, "go")); err != nil || got != want {
		tmp, err := os.MkdirTemp(base, name+".bin-")
		if err != nil {
			return nil, "", err
		}
		defer os.RemoveAll(tmp)
		if err := os.Symlink(want, filepath.Join(tmp, "go")); err != nil {
			return nil, "", err
		}
		os.RemoveAll(bin)
		if err := os.Rename(tmp, bin); err != nil && !errors.Is(err, fs.ErrExist) && !isNotEmpty(err) {
			return nil, "", err
		}
	}
	out := make([]string, 0, len(env)+2)
	path := bin
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			path += string(filepath.ListSeparator) + kv[len("PATH="):]
		case strings.HasPrefix(kv, "GOTOOLCHAIN="), strings.HasPrefix(kv, "GOROOT="):
		default:
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+path, "GOTOOLCHAIN=local"), dst, nil
}

// linkTree makes dst hold src's tree: files hard-linked, or copied where
// a link cannot be made (another file system), folders made anew.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			if err := os.Link(p, to); err == nil {
				return nil
			}
			return copyFile(p, to)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, st.Mode().Perm())
}

// checkCopy compares the private GOROOT with the module cache's: the same
// files, each the same file (a link) or the same bytes (a copy). Its
// error wraps fs.ErrNotExist when there is no copy yet.
func checkCopy(src, dst string) error {
	if _, err := os.Lstat(dst); err != nil {
		return err
	}
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		a, err := os.Stat(p)
		if err != nil {
			return err
		}
		b, err := os.Lstat(filepath.Join(dst, rel))
		if err != nil {
			return fmt.Errorf("%s: %w", rel, errChanged)
		}
		n++
		if os.SameFile(a, b) {
			return nil
		}
		if !b.Mode().IsRegular() || a.Size() != b.Size() {
			return fmt.Errorf("%s: %w", rel, errChanged)
		}
		x, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		y, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || string(x) != string(y) {
			return fmt.Errorf("%s: %w", rel, errChanged)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A file added to the copy (a runtime file an overlay would otherwise
	// have to add) is a change too.
	m := 0
	err = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			m++
		}
		return err
	})
	if err == nil && m != n {
		err = fmt.Errorf("%d files, the module cache's %d: %w", m, n, errChanged)
	}
	return err
}

var errChanged = errors.New("differs from the module cache's toolchain")

// switchedToolchain is the step of Prepare that moves a build whose
// toolchain lives in GOMODCACHE to the private GOROOT.
//
// The copy lives in the user's own cache folder (cache.UserDir), whatever
// $PERFSPY_CACHE says: Go's build cache keys the standard library it
// builds by its GOROOT's path, so one stable path keeps the one-time
// rebuild with the overlays (about 80 s) one-time for every run, tests
// with caches of their own included.
func switchedToolchain(ctx context.Context, dir string, env []string, tc Toolchain) ([]string, Toolchain, error) {
	out, err := goOut(ctx, dir, env, "env", "GOMODCACHE")
	if err != nil {
		return env, tc, err
	}
	if !beneath(tc.GOROOT, strings.TrimSpace(out)) {
		return env, tc, nil
	}
	cacheDir, err := cache.UserDir()
	if err != nil {
		return nil, tc, err
	}
	env, _, err = privateGOROOT(tc.GOROOT, tc.GOVERSION, cacheDir, env)
	if err != nil {
		return nil, tc, err
	}
	out, err = goOut(ctx, dir, env, "env", "GOROOT", "GOVERSION")
	if err != nil {
		return nil, tc, fmt.Errorf("the private GOROOT of %s: %w", tc.GOVERSION, err)
	}
	f := strings.Fields(out)
	if len(f) != 2 || f[1] != tc.GOVERSION {
		return nil, tc, fmt.Errorf("the private GOROOT of %s: go env says %q", tc.GOVERSION, out)
	}
	tc.GOROOT = f[0]
	return env, tc, nil
}

// isNotEmpty is rename(2)'s error when another run put the folder in
// place first.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}
