package capability

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestBPF(t *testing.T) {
	err := BPF("counting syscalls")
	if os.Geteuid() == 0 && err != nil {
		t.Fatalf("root: %v", err)
	}
	if err != nil && (!errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "counting syscalls")) {
		t.Errorf("error %q", err)
	}
	if _, err := effective(); err != nil {
		t.Error(err)
	}
}

func TestTool(t *testing.T) {
	if _, err := Tool("coreutils", "ls"); err != nil {
		t.Fatal(err)
	}
	_, err := Tool("nosuch", "ls", "perfspy-no-such-tool")
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "perfspy-no-such-tool not found (Debian package nosuch") {
		t.Errorf("error %q", err)
	}
}

// TestOneName: the overlays' error is one type, an ErrNotSupported, and
// no capability error answers to another's name.
func TestOneName(t *testing.T) {
	err := fmt.Errorf("building: %w", Shape("copyspy overlay", "memmove_amd64.s: no line %q", "TEXT"))
	var se *ShapeError
	if !errors.As(err, &se) || se.What != "copyspy overlay" || !errors.Is(err, ErrNotSupported) {
		t.Errorf("%v: not a ShapeError that is an ErrNotSupported", err)
	}
	if got := err.Error(); got != `building: copyspy overlay not supported: memmove_amd64.s: no line "TEXT"` {
		t.Errorf("message %q", got)
	}
	if errors.As(errors.New("x"), &se) {
		t.Error("a plain error taken for a ShapeError")
	}
}
