package owned

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestRemoveStale: a folder whose owner exited is removed, the current
// process's is kept, one without an owner file is kept for an hour, and
// folders of another name are never looked at.
func TestRemoveStale(t *testing.T) {
	root := t.TempDir()
	mk := func(name string) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o600)
		return d
	}
	gone := mk("build-gone")
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(gone, File), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	mine := mk("build-mine")
	if err := Claim(mine); err != nil {
		t.Fatal(err)
	}
	fresh := mk("build-fresh")
	old := mk("build-old")
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, past, past)
	other := mk("keep-gone")
	os.WriteFile(filepath.Join(other, File), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)

	if err := RemoveStale(root, "build-"); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{gone: false, mine: true, fresh: true, old: false, other: true} {
		_, err := os.Stat(d)
		if kept := err == nil; kept != want {
			t.Errorf("%s: kept %v, want %v", filepath.Base(d), kept, want)
		}
	}
	if !Alive(mine) || Alive(gone) || Alive(fresh) {
		t.Errorf("Alive: mine %v, gone %v, fresh %v", Alive(mine), Alive(gone), Alive(fresh))
	}
	if err := RemoveStale(filepath.Join(root, "none"), "build-"); err != nil {
		t.Errorf("a missing root: %v", err)
	}
}
