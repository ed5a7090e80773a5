package withagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstBuildNote: the "rebuilds the standard library" clause is said
// before the first build with an overlay content, and not after it; a
// change in an overlaid file's content (not its private path) is a new
// first build.
func TestFirstBuildNote(t *testing.T) {
	dir := t.TempDir()
	goroot := filepath.Join(dir, "goroot")
	b := &builder{cache: filepath.Join(dir, "cache"), setup: &Setup{Toolchain: Toolchain{GOROOT: goroot, GOVERSION: "go1.26.8", GOARCH: "amd64"}}}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	malloc := filepath.Join(goroot, "src", "runtime", "malloc.go")
	first := map[string]string{malloc: write("run1-malloc.go", "package runtime // v1"), "/src/app/agent.go": write("agent1.go", "package main")}
	key := b.stdKey(first)
	if note := b.firstBuildNote(key); !strings.Contains(note, "rebuilds the standard library") {
		t.Fatalf("before any build: %q, want the first build's clause", note)
	}
	b.markStdBuilt(key)
	// The same content from another run's private folder, and the
	// target's own file changed: the standard library is the same.
	again := map[string]string{malloc: write("run2-malloc.go", "package runtime // v1"), "/src/app/agent.go": write("agent2.go", "package main // edited")}
	if k := b.stdKey(again); k != key || b.firstBuildNote(k) != "" {
		t.Fatalf("same overlay content, other paths: key %s (was %s), note %q; want the same key and no clause", k, key, b.firstBuildNote(k))
	}
	changed := map[string]string{malloc: write("run3-malloc.go", "package runtime // v2")}
	if k := b.stdKey(changed); k == key || b.firstBuildNote(k) == "" {
		t.Fatalf("changed overlay content: key %s, note %q; want a new key and the clause", k, b.firstBuildNote(k))
	}
	b.setup.Toolchain.GOVERSION = "go1.27.3"
	if k := b.stdKey(first); k == key {
		t.Fatal("another toolchain gave the same key")
	}
}
