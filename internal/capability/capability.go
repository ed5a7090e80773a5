// Package capability says whether this process may use what some figures
// need (eBPF programs, valgrind), with one sentinel, ErrNotSupported, that
// every refusal wraps: callers fall back or skip on errors.Is(err,
// capability.ErrNotSupported) and print the error, which says what is
// missing and how to get it.
package capability

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// ErrNotSupported is wrapped by every error of this package.
var ErrNotSupported = errors.New("not supported here")

// Linux capability numbers (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// effective reads the effective capability set from /proc/self/status.
func effective() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff line in /proc/self/status")
}

// BPF returns nil when the process may load eBPF programs and attach them
// to tracepoints and uprobes: as root, or with CAP_SYS_ADMIN, or with
// CAP_BPF and CAP_PERFMON (Linux 5.8 and later) without root. what names
// the figure, for the message.
func BPF(what string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%s: not available on this platform (eBPF is Linux's; here %s): %w", what, runtime.GOOS, ErrNotSupported)
	}
	if os.Geteuid() == 0 {
		return nil
	}
	caps, err := effective()
	if err == nil && (caps&(1<<capSysAdmin) != 0 || caps&(1<<capBPF) != 0 && caps&(1<<capPerfmon) != 0) {
		return nil
	}
	return fmt.Errorf("%s needs eBPF (root, or CAP_BPF and CAP_PERFMON): %w", what, ErrNotSupported)
}

// Tool returns the path of each named program on PATH, or an error that
// names the missing ones and the Debian package that has them.
func Tool(pkg string, names ...string) ([]string, error) {
	var paths, missing []string
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			missing = append(missing, n)
			continue
		}
		paths = append(paths, p)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s not found (Debian package %s: apt-get install %s): %w", strings.Join(missing, " and "), pkg, pkg, ErrNotSupported)
	}
	return paths, nil
}

// ShapeError is a Go release (or a GOARCH, a GOEXPERIMENT) whose sources
// do not have the shape an overlay patches: what is refused, and why. It
// is the one error of every overlay (copyspy, allocspy, the request
// boundaries, the benchmark window), and errors.Is(err, ErrNotSupported)
// holds for it.
type ShapeError struct {
	What   string // "copyspy overlay", "benchmark window", ...
	Detail string // the file and what it lacks
}

func (e *ShapeError) Error() string { return e.What + " not supported: " + e.Detail }

// Is makes a ShapeError an ErrNotSupported.
func (e *ShapeError) Is(target error) bool { return target == ErrNotSupported }

// Shape returns a *ShapeError for what, its detail formatted.
func Shape(what, format string, a ...any) error {
	return &ShapeError{What: what, Detail: fmt.Sprintf(format, a...)}
}
