package cmdmain

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestMain runs the crash the test asks for in a process of its own.
func TestMain(m *testing.M) {
	switch os.Getenv("CMDMAIN_CRASH") {
	case "panic":
		Run(func(io.Writer, io.Writer) int { panic("boom") })
	case "overflow":
		Run(func(io.Writer, io.Writer) int { return recurse(1) })
	case "version":
		os.Args = []string{"/x/allocdiff", "-version"}
		Run(func(io.Writer, io.Writer) int { return Usage })
	case "stuck":
		// A command that never looks at its context: the second signal
		// ends it.
		ctx, stop := SignalContext()
		defer stop()
		Run(func(_, stderr io.Writer) int {
			io.WriteString(stderr, "ready\n")
			<-ctx.Done()
			io.WriteString(stderr, "first signal seen; stuck\n")
			select {}
		})
	case "escape":
		Run(func(stdout, _ io.Writer) int {
			io.WriteString(stdout, "name\x1b]52;c;aGk=\x07 main.rtl\u202egnp.exe\n")
			return OK
		})
	}
	os.Exit(m.Run())
}

// recurse overflows the stack: the depth comes from its input, as a
// parser's would.
func recurse(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n < 0 { // never: a recursion the checker sees can end
		return 0
	}
	return recurse(n+1) + int(pad[0])
}

func run(t *testing.T, what string) (int, syscall.Signal, string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CMDMAIN_CRASH="+what)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return -1, ws.Signal(), string(out)
		}
		return ws.ExitStatus(), 0, string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, 0, string(out)
}

// TestCrashNotUsage: a panic exits 1 and says it is a bug; a stack
// overflow (a fatal error, which Go ends with status 2) aborts instead:
// neither is taken for the usage code.
func TestCrashNotUsage(t *testing.T) {
	if code, _, out := run(t, "panic"); code != Failed || !strings.Contains(out, "internal error") || !strings.Contains(out, "boom") {
		t.Errorf("panic: exit %d, %q", code, out)
	}
	code, sig, out := run(t, "overflow")
	if code == Usage || sig != syscall.SIGABRT || !strings.Contains(out, "stack overflow") {
		t.Errorf("stack overflow: exit %d, signal %v; want SIGABRT\n%.300s", code, sig, out)
	}
}

// TestOutputEscaped: what a command prints reaches the terminal with its
// control sequences and bidirectional overrides escaped.
func TestOutputEscaped(t *testing.T) {
	_, _, out := run(t, "escape")
	if out != `name\x1b]52;c;aGk=\x07 main.rtl\u202egnp.exe`+"\n" {
		t.Errorf("printed %q", out)
	}
}

// TestVersion: every command answers -version from its build info.
func TestVersion(t *testing.T) {
	code, _, out := run(t, "version")
	if code != OK || !strings.HasPrefix(out, "allocdiff ") || strings.TrimSpace(strings.TrimPrefix(out, "allocdiff ")) != Version() {
		t.Errorf("-version: exit %d, %q (Version() = %q)", code, out, Version())
	}
}

// TestSecondSignalExits: a command stuck after the first SIGINT (as one
// blocked in open() on a FIFO is) exits 130 at the second.
func TestSecondSignalExits(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CMDMAIN_CRASH=stuck")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, _ := stderr.Read(buf); !strings.Contains(string(buf[:n]), "ready") {
		t.Fatalf("the command did not start: %q", buf[:n])
	}
	cmd.Process.Signal(os.Interrupt)
	if n, _ := stderr.Read(buf); !strings.Contains(string(buf[:n]), "stuck") {
		t.Fatalf("the first signal was not seen: %q", buf[:n])
	}
	cmd.Process.Signal(os.Interrupt)
	rest, _ := io.ReadAll(stderr)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != Interrupted || !strings.Contains(string(rest), "a second signal") {
		t.Errorf("after a second SIGINT: %v, %q; want exit %d and the reason", err, rest, Interrupted)
	}
}
