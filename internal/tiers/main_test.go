package main

import (
	"os"
	"strings"
	"testing"
)

// TestFollow: a short pass of a passing package with two long tests (one
// skipped whole, one through a subtest), a failing package and a build
// error: the skipped tests are listed for the full pass, the failure and
// the build error are printed, the passing tests' lines are not.
func TestFollow(t *testing.T) {
	f, err := os.Open("testdata/short.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	var ts []timing
	skipped, err := follow(f, &out, &ts)
	if err != nil {
		t.Fatal(err)
	}
	// Top-level tests that passed or failed, with their seconds; no subtest.
	if len(ts) != 3 || ts[1] != (timing{"example.com/a", "TestMixed", 2.5}) || ts[2].test != "TestBroken" {
		t.Errorf("timings: %+v", ts)
	}
	if got, want := patterns(skipped), "example.com/a ^(TestEndToEnd|TestMixed)$\n"; got != want {
		t.Errorf("patterns: %q, want %q", got, want)
	}
	want := "ok  \texample.com/a\t0.010s\n" +
		"=== RUN   TestBroken\n    b_test.go:4: got 1, want 2\n--- FAIL: TestBroken (0.00s)\n" +
		"FAIL\texample.com/b\t0.005s\n" +
		"# example.com/d\nd/d.go:5:2: undefined: x\n" +
		"# example.com/c\nc/c.go:3:1: syntax error\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}
