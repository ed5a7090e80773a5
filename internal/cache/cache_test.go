package cache

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDirWithoutHome: with neither HOME nor XDG_CACHE_HOME (CI containers,
// systemd units) the cache is a folder of the user's own under TMPDIR,
// created 0700; one another user made first is refused, never reused.
func TestDirWithoutHome(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv(Env, "")
	t.Setenv("TMPDIR", tmp)
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(tmp, "perfspy-"+strconv.Itoa(os.Geteuid())); d != want {
		t.Errorf("Dir() = %s, want %s", d, want)
	}
	st, err := os.Stat(d)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("created %04o, want 0700", st.Mode().Perm())
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: only root can give the folder to another user")
	}
	if err := os.Chown(d, 65534, 65534); err != nil { // nobody
		t.Fatal(err)
	}
	_, err = Dir()
	var ue *UnsafeError
	if !errors.As(err, &ue) {
		t.Fatalf("Dir() on a folder of uid 65534: %v, want an UnsafeError", err)
	}
	t.Log(err)
}

// TestCheckRefuses: a folder others may write, a symbolic link and a file
// are refused; a private folder is taken.
func TestCheckRefuses(t *testing.T) {
	tmp := t.TempDir()
	open := filepath.Join(tmp, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	group := filepath.Join(tmp, "group")
	if err := os.Mkdir(group, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(group, 0o770); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{open, group, link, file} {
		var ue *UnsafeError
		if err := Ensure(d); !errors.As(err, &ue) {
			t.Errorf("Ensure(%s) = %v, want an UnsafeError", filepath.Base(d), err)
		}
	}
	if err := Ensure(filepath.Join(tmp, "new")); err != nil {
		t.Errorf("Ensure(new) = %v", err)
	}
}

// TestInstallReplaces: a folder whose files differ from what is installed
// (a changed file, an added one, a missing one) is replaced; the same
// files are kept as they are.
func TestInstallReplaces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	files := map[string][]byte{"go.mod": []byte("module m\n"), "a/a.go": []byte("package a\n")}
	if err := Install(dir, files); err != nil {
		t.Fatal(err)
	}
	for name, tamper := range map[string]func() error{
		"changed": func() error {
			return os.WriteFile(filepath.Join(dir, "a", "a.go"), []byte("package a\nfunc init() { panic(1) }\n"), 0o600)
		},
		"added":   func() error { return os.WriteFile(filepath.Join(dir, "a", "evil.go"), []byte("package a\n"), 0o600) },
		"missing": func() error { return os.Remove(filepath.Join(dir, "go.mod")) },
		"symlink": func() error { return os.Symlink("/etc/passwd", filepath.Join(dir, "a", "b.go")) },
	} {
		if err := tamper(); err != nil {
			t.Fatal(err)
		}
		if err := Install(dir, files); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := ReadTree(dir)
		if err != nil || !sameFiles(got, files) {
			t.Errorf("%s: after Install the folder holds %d files (%v), want exactly the installed ones", name, len(got), err)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	if len(ents) != 1 {
		t.Errorf("Install left %d entries beside the folder, want none", len(ents)-1)
	}
}

// TestUnsafeSaysWhatMovesIt: a planted folder under XDG_CACHE_HOME is
// refused with the variable that moves it: PERFSPY_CACHE for Dir's,
// XDG_CACHE_HOME for UserDir's, which PERFSPY_CACHE does not move.
func TestUnsafeSaysWhatMovesIt(t *testing.T) {
	home := t.TempDir()
	planted := filepath.Join(home, "perfspy")
	os.Mkdir(planted, 0o777)
	os.Chmod(planted, 0o777)
	t.Setenv("XDG_CACHE_HOME", home)
	t.Setenv(Env, "")
	if _, err := Dir(); err == nil || !strings.Contains(err.Error(), "set "+Env+" (or XDG_CACHE_HOME, or HOME)") {
		t.Errorf("Dir: %v", err)
	}
	t.Setenv(Env, t.TempDir())
	if _, err := UserDir(); err == nil || !strings.Contains(err.Error(), "set XDG_CACHE_HOME (or HOME)") || !strings.Contains(err.Error(), Env+" does not move this one") {
		t.Errorf("UserDir: %v", err)
	}
}
