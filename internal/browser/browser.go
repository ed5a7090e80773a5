// Package browser opens pages in Debian's headless Chromium for the tests
// of what perfspy writes for people to open (flame pages, ab's report).
package browser

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// Chromium returns the path of Debian's chromium; the test skips, saying
// why, without it, and with -short.
func Chromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a browser; skipped with -short")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("skipped: no chromium on PATH (apt-get install chromium; test.sh does it as root)")
	return ""
}

// Headless runs chromium headless with args (a throwaway profile, no
// sandbox for root, no GPU) and returns what it printed.
func Headless(t testing.TB, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--virtual-time-budget=5000",
		"--user-data-dir=" + t.TempDir()}, args...)
	out, err := exec.CommandContext(ctx, bin, all...).Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return string(out)
}
