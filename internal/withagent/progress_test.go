package withagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestToolchainNote: a go.mod asking for a toolchain this machine does not
// have is said before the go command downloads it (a first run printed
// only "go: downloading go1.27.3" for three minutes); nothing is said for
// one it has, or when GOTOOLCHAIN keeps the local one.
func TestToolchainNote(t *testing.T) {
	dir := t.TempDir()
	write := func(gomod string) {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	env := withEnv(os.Environ(), "GOTOOLCHAIN=auto")
	write("module example.com/x\n\ngo 1.99.0\n")
	if note := toolchainNote(ctx, dir, env); !strings.Contains(note, "go.mod's go line asks for go1.99.0") || !strings.Contains(note, "downloads it first") {
		t.Errorf("go 1.99.0: %q", note)
	}
	write("module example.com/x\n\ngo 1.21\n\ntoolchain go1.99.1\n")
	if note := toolchainNote(ctx, dir, env); !strings.Contains(note, "go.mod's toolchain line asks for go1.99.1") {
		t.Errorf("toolchain go1.99.1: %q", note)
	}
	if note := toolchainNote(ctx, dir, withEnv(env, "GOTOOLCHAIN=local")); note != "" {
		t.Errorf("GOTOOLCHAIN=local: %q", note)
	}
	write("module example.com/x\n\ngo 1.21\n")
	if note := toolchainNote(ctx, dir, env); note != "" {
		t.Errorf("go 1.21: %q", note)
	}
	if note := toolchainNote(ctx, dir, withEnv(env, "GOTOOLCHAIN=go1.99.2+auto")); !strings.Contains(note, "GOTOOLCHAIN asks for go1.99.2") {
		t.Errorf("GOTOOLCHAIN=go1.99.2+auto: %q", note)
	}
}

// TestHeartbeat: a build that is still going says so, until it ends.
func TestHeartbeat(t *testing.T) {
	old := heartbeatEvery
	heartbeatEvery = 5 * time.Millisecond
	defer func() { heartbeatEvery = old }()
	var mu sync.Mutex
	var lines []string
	stop := heartbeat("./srv", func(f string, a ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, a...))
		mu.Unlock()
	})
	time.Sleep(50 * time.Millisecond)
	stop()
	mu.Lock()
	n := len(lines)
	mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n == 0 || !strings.HasPrefix(lines[0], "still building ./srv: ") {
		t.Fatalf("heartbeat lines: %q", lines)
	}
	if len(lines) != n {
		t.Errorf("%d lines after stop", len(lines)-n)
	}
}
