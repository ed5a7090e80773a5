package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

const benchLib = `package lib

var sink []byte

// Work allocates 32 bytes.
func Work() { sink = make([]byte, 32) //CALL
}

//EXTRA
`

const benchLibTest = `package lib

import "testing"

func BenchmarkWork(b *testing.B) {
	for range b.N {
		Work()
	}
}
`

// libCommitter commits, in r (module mod), a package lib of the source it
// is given with the test file test, and returns the commit.
func libCommitter(r *testRepo, mod, test string) func(src, msg string) string {
	return func(src, msg string) string {
		os.MkdirAll(filepath.Join(r.dir, "lib"), 0o755)
		os.WriteFile(filepath.Join(r.dir, "go.mod"), []byte("module "+mod+"\n\ngo 1.26\n"), 0o644)
		os.WriteFile(filepath.Join(r.dir, "lib", "lib.go"), []byte(src), 0o644)
		os.WriteFile(filepath.Join(r.dir, "lib", "lib_test.go"), []byte(test), 0o644)
		r.git("add", "-A")
		r.git("commit", "-q", "-m", msg)
		return r.git("rev-parse", "HEAD")
	}
}

// TestABBench: probe ab -bench, with the repository found from the
// target's folder (no -repo, run from another repository): one more
// 64-byte allocation per op, kept on a list, is +1 allocs/op, +64 B/op
// and +64 retained-B/op exactly, named lib.extra in the allocations and
// in what the ops leave, and fails the gate on allocs/op.
func TestABBench(t *testing.T) {
	skipShort(t)
	r := newTestRepo(t, "example.com/abbench")
	commit := libCommitter(r, "example.com/abbench", benchLibTest)
	c1 := commit(benchLib, "one")
	c2 := commit(strings.Replace(strings.Replace(benchLib, "//EXTRA", "type node struct {\n\tnext *node\n\tpad  [56]byte\n}\n\nvar kept *node\n\n//go:noinline\nfunc extra() { kept = &node{next: kept} }", 1), "//CALL", "; extra()", 1), "two")
	out := filepath.Join(t.TempDir(), "ab")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"ab", "-q", "-bench", ".", "-benchtime", "1000x", "-rounds", "4", "-before", c1, "-after", c2,
		"-max-regress", "allocs/op=1", "-out", out, filepath.Join(r.dir, "lib")}, &o, &e)
	checkNoOrphans(t)
	if code != ExitFailed || !strings.Contains(e.String(), "allocs/op") {
		t.Fatalf("probe ab -bench: exit %d, want 1 naming allocs/op\n%s%s", code, o.String(), e.String())
	}
	var res struct {
		Metrics   map[string]schema.ABMetric
		Functions []schema.ABFunction
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "ab.json"))), &res); err != nil {
		t.Fatal(err)
	}
	var allocs, space, kept, left *schema.ABMetric
	for name, m := range res.Metrics {
		m := m
		switch {
		case strings.HasPrefix(name, "BenchmarkWork") && strings.HasSuffix(name, " allocs/op"):
			allocs = &m
		case strings.HasPrefix(name, "BenchmarkWork") && strings.HasSuffix(name, " B/op"):
			space = &m
		case strings.HasPrefix(name, "BenchmarkWork") && strings.HasSuffix(name, " retained-B/op"):
			kept = &m
		case strings.HasPrefix(name, "BenchmarkWork") && strings.HasSuffix(name, " goroutines-left/op"):
			left = &m
		}
	}
	if allocs == nil || allocs.Delta != 1 || allocs.Verdict != "regression" || space == nil || space.Delta != 64 {
		t.Errorf("allocs/op %+v, B/op %+v; want +1 and +64 exactly, a regression", allocs, space)
	}
	if kept == nil || kept.Delta != 64 || kept.Verdict != "regression" || left == nil || left.Delta != 0 || left.Verdict != "no change" {
		t.Errorf("retained-B/op %+v, goroutines-left/op %+v; want +64 exactly, a regression, and no change", kept, left)
	}
	found, foundKept := false, false
	for _, f := range res.Functions {
		found = found || strings.HasSuffix(f.Profile, " allocs") && f.Key == "example.com/abbench/lib.extra" && f.Delta == 1
		foundKept = foundKept || strings.HasSuffix(f.Profile, " retained") && f.Key == "example.com/abbench/lib.extra" && f.Delta == 64
	}
	if !found || !foundKept {
		t.Errorf("lib.extra +1 allocation and +64 B retained per op not among the functions: %+v", res.Functions)
	}
	if rep := readFile(t, filepath.Join(out, "report.md")); !strings.Contains(rep, "top function changes per op") {
		t.Errorf("report.md:\n%s", rep)
	}
}

const insLib = `package lib

var sink uint64

//go:noinline
func Hash(n int) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < n; i++ {
		h = (h ^ uint64(i)) * 1099511628211
	}
	return h
}

func Work() { sink = Hash(100) //HASH
}
`

const insLibTest = `package lib

import "testing"

func BenchmarkWork(b *testing.B) {
	for b.Loop() {
		Work()
	}
}
`

// TestABBenchInstructions: probe ab -bench -instructions on a head that
// hashes 50 bytes more an op (the same line, Hash(150)): instructions/op
// grows by 50 iterations of Hash's loop (its disassembly), a regression
// the 1% gate fails, with lib.Hash the function that moved; no other
// function moves.
func TestABBenchInstructions(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	r := newTestRepo(t, "example.com/abins")
	commit := libCommitter(r, "example.com/abins", insLibTest)
	c1 := commit(insLib, "one")
	c2 := commit(strings.Replace(insLib, "Hash(100)", "Hash(150)", 1), "two")
	bin := filepath.Join(t.TempDir(), "lib.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "./lib")
	build.Dir = r.dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	loop := float64(loopLengthOf(t, bin, "example.com/abins/lib.Hash"))
	out := filepath.Join(t.TempDir(), "ab")
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"ab", "-q", "-bench", ".", "-instructions", "-retained=false", "-offcpu=false", "-copies", "off", "-syscalls", "off", "-rounds", "2", "-before", c1, "-after", c2,
		"-max-regress", "instructions/op=1", "-out", out, filepath.Join(r.dir, "lib")}, &o, &e)
	checkNoOrphans(t)
	if code != ExitFailed || !strings.Contains(e.String(), "instructions/op") {
		t.Fatalf("probe ab -bench -instructions: exit %d, want 1 naming instructions/op\n%s%s", code, o.String(), e.String())
	}
	var res struct {
		Metrics   map[string]schema.ABMetric
		Functions []schema.ABFunction
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "ab.json"))), &res); err != nil {
		t.Fatal(err)
	}
	var ins *schema.ABMetric
	for name, m := range res.Metrics {
		if strings.HasPrefix(name, "BenchmarkWork") && strings.HasSuffix(name, " instructions/op") {
			m := m
			ins = &m
		}
	}
	if ins == nil || ins.Verdict != "regression" || math.Abs(ins.Delta-50*loop) > 3 {
		t.Fatalf("instructions/op %+v: want a regression of 50 iterations of %v", ins, loop)
	}
	t.Logf("instructions/op %+v; loop %v", *ins, loop)
	for _, f := range res.Functions {
		if !strings.HasSuffix(f.Profile, " instructions") || f.Delta == 0 {
			continue
		}
		t.Logf("function %s %+.2f", f.Key, f.Delta)
		if f.Key != "example.com/abins/lib.Hash" && math.Abs(f.Delta) >= 1 {
			t.Errorf("function %s moved %+.2f instructions/op: only lib.Hash did", f.Key, f.Delta)
		}
		if f.Key == "example.com/abins/lib.Hash" && math.Abs(f.Delta-50*loop) > 1 {
			t.Errorf("lib.Hash %+.2f instructions/op, want %v", f.Delta, 50*loop)
		}
	}
}
