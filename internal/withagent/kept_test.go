package withagent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKeptBinaries: test binaries are reused only with the key they were
// built with, and only as they were written; the key follows the
// overlay's files by content and the go command's environment.
func TestKeptBinaries(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("go.mod", "module example.com/m\n")
	over := write("overlay.go", "package runtime\n")
	b := &builder{t: &Binary{Spec: "example.com/m@v1.0.0", ModDir: dir, Binary: write("m.test", "bin"), PlainBinary: write("m.test.plain", "plain")},
		setup: &Setup{Dir: dir, Env: append(os.Environ(), "GOTMPDIR="+dir), Pkg: "./."}, replace: map[string]string{"/goroot/src/runtime/zz.go": over}}
	ctx := context.Background()
	key, err := b.keptKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if kept(b.t, key) {
		t.Fatal("kept before keep")
	}
	keep(b.t, key)
	if !kept(b.t, key) {
		t.Fatal("not kept after keep")
	}
	if kept(b.t, key[:10]) {
		t.Error("kept with another key")
	}
	// Another build's temporary folder is the same build.
	b.setup.Env = append(b.setup.Env, "GOTMPDIR="+t.TempDir())
	if k, err := b.keptKey(ctx); err != nil || k != key {
		t.Errorf("GOTMPDIR changed the key: %v", err)
	}
	for name, change := range map[string]func(){
		"overlay": func() { write("overlay.go", "package runtime // changed\n") },
		"env":     func() { b.setup.Env = append(b.setup.Env, "GOFLAGS=-tags=perfspy_kept") },
		"go.mod":  func() { write("go.mod", "module example.com/m\n\ngo 1.26\n") },
	} {
		change()
		k, err := b.keptKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k == key {
			t.Errorf("%s changed: the same key", name)
		}
		key = k
	}
	keep(b.t, key)
	// A binary written anew (another build) is not the one kept.
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(b.t.PlainBinary, later, later); err != nil {
		t.Fatal(err)
	}
	if kept(b.t, key) {
		t.Error("kept after the plain binary was written again")
	}
	os.Remove(b.t.Binary)
	keep(b.t, key)
	if kept(b.t, key) {
		t.Error("kept without the binary")
	}
}
