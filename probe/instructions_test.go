package probe

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func instructionsPerRequest(t *testing.T, path string) float64 {
	t.Helper()
	res, err := Run(context.Background(), Config{Target: "./testdata/probetarget", Path: path, Instructions: true, Requests: 300,
		Out: filepath.Join(t.TempDir(), "out")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkNoOrphans(t)
	if res.Summary.Verdict != VerdictCountsOnly || res.Summary.Sources["instructions"] != SourceInstructions {
		t.Fatalf("verdict %q, sources %v", res.Summary.Verdict, res.Summary.Sources)
	}
	p, err := readProfile(filepath.Join(res.Dir, "instructions.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readFile(t, filepath.Join(res.Dir, "bench.txt")), "Unit instructions/req assume=exact") {
		t.Error("bench.txt does not declare instructions/req exact")
	}
	return *res.Summary.PerRequest.Instructions
}

// loopLength reads the disassembly of probetarget's main.burn and counts
// the instructions of its loop: from the target of the backward jump to
// the jump. It is the oracle of the instruction counts.
func loopLength(t *testing.T) int {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probetarget")
	if out, err := exec.Command("go", "build", "-tags", "valgrind", "-o", bin, "./testdata/probetarget").CombinedOutput(); err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "tool", "objdump", "-s", "^main.burn$", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	var jump, target uint64
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[1], "0x") {
			continue
		}
		a, _ := strconv.ParseUint(f[1][2:], 16, 64)
		addrs = append(addrs, a)
		if strings.HasPrefix(f[3], "J") && len(f) >= 5 && strings.HasPrefix(f[4], "0x") {
			if to, _ := strconv.ParseUint(f[4][2:], 16, 64); to < a {
				jump, target = a, to
			}
		}
	}
	n := 0
	for _, a := range addrs {
		if a >= target && a <= jump {
			n++
		}
	}
	if jump == 0 || n == 0 {
		t.Fatalf("no loop in main.burn:\n%s", out)
	}
	return n
}

// TestInstructions: a handler's known loop shows in instructions per
// request as the disassembly says, and runs of one binary agree.
func TestInstructions(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	body := loopLength(t)
	var i0 []float64
	for k := 0; k < 3; k++ {
		i0 = append(i0, instructionsPerRequest(t, "/loop?n=0"))
	}
	// The baseline's run-to-run noise, divided by many iterations, is small.
	const n = 200000
	iN := instructionsPerRequest(t, "/loop?n=200000")
	base := append([]float64(nil), i0...)
	sort.Float64s(base)
	per := (iN - base[1]) / n
	t.Logf("instructions/req: n=0 %v, n=%d %.2f; %.4f per iteration, the disassembly's loop has %d", i0, n, iN, per, body)
	if math.Abs(per-float64(body)) > 0.01*float64(body) {
		t.Errorf("%.4f instructions per loop iteration, the loop has %d", per, body)
	}
	// Measured spread of one binary here: 0.5% to 4% per request (map hash
	// seeds and the scheduler's search for work vary per run); the goal of
	// 0.1% is not met yet. This bound catches a new source of variation.
	for _, v := range i0[1:] {
		if math.Abs(v-i0[0]) > 0.06*i0[0] {
			t.Errorf("runs of one binary differ by more than 6%%: %v", i0)
		}
	}
}

func TestInstructionsNoValgrind(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	dir := t.TempDir()
	os.Symlink(goBin, filepath.Join(dir, "go"))
	t.Setenv("PATH", dir)
	_, err = Run(context.Background(), Config{Target: "./testdata/probetarget", Instructions: true, Out: filepath.Join(t.TempDir(), "out")}, nil)
	if !errors.Is(err, ErrNoValgrind) || !strings.Contains(err.Error(), "Debian package valgrind") {
		t.Errorf("without valgrind: %v", err)
	}
}
