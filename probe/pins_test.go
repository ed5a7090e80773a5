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
