package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fixed-seed overlay patches the seed line of this Go's runtime/rand.go
// in place, and refuses a rand.go that seeds another way.
func TestSeedOverlay(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	goroot := strings.TrimSpace(string(out))
	randGo := filepath.Join(goroot, "src", "runtime", "rand.go")
	orig, err := os.ReadFile(randGo)
	if err != nil {
		t.Fatal(err)
	}
	ov := map[string]string{}
	if err := seedOverlay(ov, goroot, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(ov[randGo])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(got), "\n") != strings.Count(string(orig), "\n") ||
		!strings.Contains(string(got), "seed[i] = byte(i + 1) }; globalRand.state.Init(*seed)\n") {
		t.Errorf("the patched rand.go moves lines or lacks the constant seed")
	}
	fake := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fake, "src", "runtime"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "src", "runtime", "rand.go"), []byte("package runtime\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := seedOverlay(map[string]string{}, fake, t.TempDir()); err == nil || !strings.Contains(err.Error(), "rand.go") {
		t.Errorf("a rand.go of another shape: %v", err)
	}
}
