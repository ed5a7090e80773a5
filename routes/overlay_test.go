package routes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/gorelease"
)

// TestRuntimeOverlayReleases: the mark's edits apply to the runtime of
// every supported release, each on its line (line numbers do not move).
func TestRuntimeOverlayReleases(t *testing.T) {
	for _, rel := range gorelease.Supported {
		t.Run(rel, func(t *testing.T) { testRuntimeOverlay(t, rel) })
	}
}

func testRuntimeOverlay(t *testing.T, rel string) {
	goroot, err := gorelease.GOROOT(rel)
	if err != nil {
		t.Fatal(err)
	}
	ov, err := RuntimeOverlay(goroot, t.TempDir())
	if err != nil {
		t.Fatalf("request mark overlay for this toolchain: %v", err)
	}
	if len(ov) != 10 {
		t.Errorf("overlay has %d entries, want 10 (runtime2.go, proc.go, chan.go, select.go, time.go, sema.go, the mark's and the handoffs' files; syscall_linux.go and its declaration): %v", len(ov), ov)
	}
	for _, f := range []string{"runtime/runtime2.go", "runtime/proc.go", "runtime/chan.go", "runtime/select.go", "runtime/time.go", "runtime/sema.go", "syscall/syscall_linux.go"} {
		src := filepath.Join(goroot, "src", f)
		orig, _ := os.ReadFile(src)
		got, err := os.ReadFile(ov[src])
		if err != nil {
			t.Fatal(err)
		}
		if a, b := strings.Count(string(orig), "\n"), strings.Count(string(got), "\n"); a != b {
			t.Errorf("%s: %d lines, patched %d", f, a, b)
		}
		if !strings.Contains(string(got), "perfspy") {
			t.Errorf("%s: no mark", f)
		}
	}
}

// TestHTTPFile: the net/http file has the folding code and no
// placeholder left.
func TestHTTPFile(t *testing.T) {
	f := HTTPFile("perfspy.request")
	for _, want := range []string{"func perfspyFold(", `"perfspy.request"`, `"(before routing)"`, "package http"} {
		if !strings.Contains(f, want) {
			t.Errorf("HTTPFile lacks %q", want)
		}
	}
	for _, bad := range []string{"REGIONTYPE", "BEFOREROUTING", "ROUTELOG", "ROUTECAP", "SAMPLEENV", "SAMPLEFUNC", "PUSHENV", "SOCKETENV", "SAMPLEDEFAULT", "package routes"} {
		if strings.Contains(f, bad) {
			t.Errorf("HTTPFile has %q", bad)
		}
	}
}
