package offcpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/gorelease"
)

// TestOverlayReleases is the request boundaries' layout test: each
// supported release's net/http takes its edits (HTTP/1 and its HTTP/2
// server), each on its line.
func TestOverlayReleases(t *testing.T) {
	for _, rel := range gorelease.Supported {
		t.Run(rel, func(t *testing.T) {
			goroot, err := gorelease.GOROOT(rel)
			if err != nil {
				t.Fatal(err)
			}
			ov, err := Overlay(goroot, t.TempDir())
			if err != nil {
				t.Fatalf("request boundaries on %s: %v", rel, err)
			}
			regions := 0
			for src, dst := range ov {
				got, err := os.ReadFile(dst)
				if err != nil {
					t.Fatal(err)
				}
				regions += strings.Count(string(got), "perfspyRegion.Begin(")
				orig, err := os.ReadFile(src)
				if err != nil {
					continue // a file the overlay adds
				}
				if a, b := strings.Count(string(orig), "\n"), strings.Count(string(got), "\n"); a != b {
					t.Errorf("%s: %d lines, patched %d", filepath.Base(src), a, b)
				}
			}
			if regions != 2 {
				t.Errorf("%d request regions begin, want 2 (HTTP/1 and HTTP/2)", regions)
			}
		})
	}
	goroot := t.TempDir()
	os.WriteFile(filepath.Join(goroot, "VERSION"), []byte("go1.28rc1\n"), 0o644)
	if _, err := Overlay(goroot, t.TempDir()); err == nil || !strings.Contains(err.Error(), "go1.28rc1") || !strings.Contains(err.Error(), capability.ErrNotSupported.Error()) && !strings.Contains(err.Error(), "not supported") {
		t.Errorf("an unknown release: %v", err)
	}
}
