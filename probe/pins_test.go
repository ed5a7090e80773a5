package probe

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
