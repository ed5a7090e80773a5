package worktree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPins: a pinned checkout whose file is rewritten or removed, or that
// gains a file the go command builds from, fails Check naming the file;
// a new log file, or nothing, passes.
func TestPins(t *testing.T) {
	for name, c := range map[string]struct {
		change func(dir string)
		bad    string // "" passes
	}{
		"untouched": {func(string) {}, ""},
		"a log":     {func(d string) { os.WriteFile(filepath.Join(d, "srv", "app.log"), []byte("x"), 0o644) }, ""},
		"rewritten": {func(d string) {
			os.WriteFile(filepath.Join(d, "srv", "main.go"), []byte("package main // evil"), 0o644)
		}, "srv/main.go (rewritten)"},
		"removed":  {func(d string) { os.Remove(filepath.Join(d, "go.sum")) }, "go.sum (removed)"},
		"added go": {func(d string) { os.WriteFile(filepath.Join(d, "srv", "zz.go"), []byte("package main"), 0o644) }, "srv/zz.go (added)"},
		"vendor": {func(d string) {
			os.MkdirAll(filepath.Join(d, "vendor", "x"), 0o755)
			os.WriteFile(filepath.Join(d, "vendor", "x", "data"), nil, 0o644)
		}, "vendor/x/data (added)"},
		"relinked":  {func(d string) { os.Remove(filepath.Join(d, "link")); os.Symlink("/etc", filepath.Join(d, "link")) }, "link (rewritten)"},
		"git aside": {func(d string) { os.WriteFile(filepath.Join(d, ".git"), []byte("gitdir: elsewhere"), 0o644) }, ""},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "srv"), 0o755)
			os.WriteFile(filepath.Join(dir, "srv", "main.go"), []byte("package main"), 0o644)
			os.WriteFile(filepath.Join(dir, "go.sum"), nil, 0o644)
			os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: x"), 0o644)
			os.Symlink("srv", filepath.Join(dir, "link"))
			p, err := Pin(dir)
			if err != nil {
				t.Fatal(err)
			}
			c.change(dir)
			err = p.Check()
			if c.bad == "" && err != nil || c.bad != "" && (!errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), c.bad)) {
				t.Errorf("Check: %v; want %q", err, c.bad)
			}
		})
	}
}
