package worktree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckReplaces: a replace or a go.work use that leads outside the
// revision's tree (by its path, an absolute one, or a link) is refused
// with its file and line; one inside, or a module version, passes.
func TestCheckReplaces(t *testing.T) {
	outside := t.TempDir()
	for name, c := range map[string]struct {
		gomod, gowork string
		bad           string
	}{
		"none":         {"module x\n", "", ""},
		"version":      {"module x\n\nreplace a.com/y => b.com/y v1.0.0\n", "", ""},
		"inside":       {"module x\n\nreplace a.com/y => ../lib\n", "", ""},
		"up and out":   {"module x\n\nreplace a.com/y => ../../shared-lib\n", "", "srv/go.mod:3: ../../shared-lib leads outside"},
		"absolute":     {"module x\n\nreplace a.com/y => " + outside + "\n", "", "srv/go.mod:3: " + outside + " leads outside"},
		"link":         {"module x\n\nreplace a.com/y => ../out\n", "", "srv/go.mod:3: ../out is a link that leads outside"},
		"block":        {"module x\n\nreplace (\n\ta.com/y => ../lib\n\ta.com/z => /tmp/z\n)\n", "", "srv/go.mod:5: /tmp/z leads outside"},
		"work use":     {"module x\n", "go 1.26\n\nuse (\n\t./srv\n\t../elsewhere\n)\n", "go.work:5: ../elsewhere leads outside"},
		"work replace": {"module x\n", "go 1.26\n\nuse ./srv\n\nreplace a.com/y => /opt/y\n", "go.work:5: /opt/y leads outside"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "srv", "cmd"), 0o755)
			os.MkdirAll(filepath.Join(root, "lib"), 0o755)
			os.Symlink(outside, filepath.Join(root, "out"))
			os.WriteFile(filepath.Join(root, "srv", "go.mod"), []byte(c.gomod), 0o644)
			if c.gowork != "" {
				os.WriteFile(filepath.Join(root, "go.work"), []byte(c.gowork), 0o644)
			}
			err := CheckReplaces(root, filepath.Join(root, "srv", "cmd"))
			if c.bad == "" && err != nil || c.bad != "" && (!errors.Is(err, ErrOutsideTree) || !strings.Contains(err.Error(), c.bad)) {
				t.Errorf("CheckReplaces: %v; want %q", err, c.bad)
			}
		})
	}
}
