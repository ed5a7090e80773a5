package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The repeatable overlay patches the seed line of this Go's runtime/rand.go,
// the cache fills of iface.go and sysmon's wake-up on entering a system
// call in proc.go in place, and refuses a runtime of another shape.
func TestRepeatableOverlay(t *testing.T) {
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
	if err := repeatableOverlay(ov, goroot, t.TempDir()); err != nil {
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
	iface := filepath.Join(goroot, "src", "runtime", "iface.go")
	origIface, err := os.ReadFile(iface)
	if err != nil {
		t.Fatal(err)
	}
	gotIface, err := os.ReadFile(ov[iface])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(gotIface), "\n") != strings.Count(string(origIface), "\n") ||
		strings.Count(string(gotIface), "cheaprand()&0 != 0") != 4 {
		t.Errorf("the patched iface.go moves lines or keeps a random cache fill")
	}
	procGo := filepath.Join(goroot, "src", "runtime", "proc.go")
	origProc, err := os.ReadFile(procGo)
	if err != nil {
		t.Fatal(err)
	}
	gotProc, err := os.ReadFile(ov[procGo])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(gotProc), "\n") != strings.Count(string(origProc), "\n") ||
		!strings.Contains(string(gotProc), "if false && sched.sysmonwait.Load() {\n\t\tsystemstack(entersyscallWakeSysmon)") ||
		strings.Count(string(gotProc), "sysmonwait.Load()") != strings.Count(string(origProc), "sysmonwait.Load()") {
		t.Errorf("the patched proc.go moves lines or still wakes sysmon on entering a system call")
	}
	if len(ov) != 3 {
		t.Errorf("overlay %v: want rand.go, iface.go and proc.go", ov)
	}
	fake := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fake, "src", "runtime"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "src", "runtime", "rand.go"), []byte("package runtime\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := repeatableOverlay(map[string]string{}, fake, t.TempDir()); err == nil || !strings.Contains(err.Error(), "rand.go") {
		t.Errorf("a rand.go of another shape: %v", err)
	}
}
