package capability

import (
	"errors"
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
