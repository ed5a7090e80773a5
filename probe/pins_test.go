package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/worktree"
)

// TestPins: a round's file that changes after it was pinned, or goes, is
// ErrTampered naming it; files untouched pass.
func TestPins(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "01-before", "allocs.pb.gz")
	os.MkdirAll(filepath.Dir(prof), 0o700)
	os.WriteFile(prof, []byte("measured"), 0o600)
	ab := &abRun{res: &ABResult{}}
	if err := ab.pin(dir); err != nil {
		t.Fatal(err)
	}
	if err := ab.res.CheckPins(); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	os.WriteFile(prof, []byte("rewritten by the head"), 0o600)
	if err := ab.res.CheckPins(); !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), prof) {
		t.Errorf("rewritten: %v", err)
	}
	os.Remove(prof)
	if err := ab.res.CheckPins(); !errors.Is(err, ErrTampered) {
		t.Errorf("removed: %v", err)
	}
}

// TestInsideTree: a revision whose target folder is a link to a folder
// outside its checkout is refused; a real folder, or one not there (the
// build says so), is not.
func TestInsideTree(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(root, "real"), 0o755)
	os.Symlink(outside, filepath.Join(root, "srv"))
	os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "inner"))
	for rel, bad := range map[string]bool{"real": false, "inner": false, "missing": false, "srv": true, "srv/cmd": true} {
		os.MkdirAll(filepath.Join(outside, "cmd"), 0o755)
		err := insideTree(root, rel)
		if (err != nil) != bad || bad && !strings.Contains(err.Error(), "leads outside the repository") {
			t.Errorf("%s: %v", rel, err)
		}
	}
}

// outsideLib makes a module outside any repository whose init leaves a
// file behind, as another user's folder under the temporary folder would:
// it returns the module's folder and the file its init would write.
func outsideLib(t *testing.T) (dir, marker string) {
	dir = t.TempDir()
	marker = filepath.Join(dir, "ran")
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/shared\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "lib.go"), []byte("package shared\n\nimport \"os\"\n\nfunc init() { os.WriteFile("+strconv.Quote(marker)+", nil, 0o644) }\n"), 0o644)
	return dir, marker
}

// TestABReplaceOutside: a head whose go.mod replaces a module with a
// folder outside its tree (another user's, under the temporary folder) is
// refused before anything is built, naming go.mod's line; the folder's
// code never runs.
func TestABReplaceOutside(t *testing.T) {
	lib, marker := outsideLib(t)
	r := newTestRepo(t, "example.com/abreplace")
	base := r.commit(abServer, "base")
	r.commit(strings.Replace(abServer, "import (\n", "import (\n\t_ \"example.com/shared\"\n", 1), "head: a shared library")
	os.WriteFile(filepath.Join(r.dir, "go.mod"), []byte("module example.com/abreplace\n\ngo 1.26\n\nrequire example.com/shared v0.0.0\n\nreplace example.com/shared => "+lib+"\n"), 0o644)
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "head: the library's folder")
	head := r.git("rev-parse", "HEAD")
	_, err := AB(context.Background(), abConfig(r.dir, base, head, filepath.Join(t.TempDir(), "ab")), nil)
	if !errors.Is(err, worktree.ErrOutsideTree) || !strings.Contains(err.Error(), "go.mod:7: "+lib+" leads outside") || !strings.Contains(err.Error(), "the after revision") {
		t.Errorf("error %v; want the head's go.mod:7 refused", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the outside folder's code ran")
	}
}
