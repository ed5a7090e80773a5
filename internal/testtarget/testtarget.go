// Package testtarget builds and starts probe's ground-truth server,
// probe/testdata/probetarget, unmodified, for the tests of the packages
// that attach to a running process (copyspy attach, syscalls).
package testtarget

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/srcroot"
)

// Start builds probetarget, starts it with args and env added to this
// process's environment, and returns it and the address it listens on.
// The process is killed when the test ends.
func Start(t testing.TB, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	root, err := srcroot.Dir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "probetarget")
	build := exec.Command("go", "build", "-o", bin, "./probe/testdata/probetarget")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building probetarget: %v\n%s", err, out)
	}
	return StartBinary(t, bin, env, args...)
}

// StartBinary starts a built probetarget with args and env added to this
// process's environment, and returns it and the address it listens on.
// The process is killed when the test ends.
func StartBinary(t testing.TB, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	return StartBinaryTo(t, io.Discard, bin, env, args...)
}

// StartBinaryTo is StartBinary with the binary's standard error after the
// line that says where it listens copied to w (which must be safe for
// use from another goroutine).
func StartBinaryTo(t testing.TB, w io.Writer, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		SkipIfForeign(t, err)
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "probetarget: listening on "); ok {
			go func() {
				for sc.Scan() {
					fmt.Fprintln(w, sc.Text())
				}
			}()
			return cmd, addr
		}
	}
	t.Fatal("probetarget did not say where it listens")
	return nil, ""
}

// SkipIfForeign skips the test when err says that the machine cannot
// run a binary built for this test's GOARCH: the test itself runs under
// an emulator (go test -exec qemu-aarch64-static), which the binaries it
// builds do not.
func SkipIfForeign(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, syscall.ENOEXEC) {
		t.Skipf("skipped: this machine cannot run the %s binary the test built (the test runs under an emulator): %v", runtime.GOARCH, err)
	}
}

// RequireRoot skips the test, saying why, when this process may not use
// eBPF (the bpf syscall, tracepoints and uprobes): not root, nor CAP_BPF
// and CAP_PERFMON.
func RequireRoot(t testing.TB, what string) {
	t.Helper()
	if err := capability.BPF(what); err != nil {
		t.Skip("skipped: " + err.Error() + "; run the tests as root")
	}
}
