package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestBenchInstructions: probe run -bench -instructions gives each
// benchmark's instructions per op, against the disassembly: the loop of
// insbench.burn has L instructions, so BenchmarkBurn3000's op runs 2,000 L
// more than BenchmarkBurn1000's, and burn's own instructions per op are
// 1,000 L (3,000 L) and a few; the set-up each benchmark does before its
// loop (burn(50000), before b.Loop and before ResetTimer) is not in them.
// A sub-benchmark (burn(2000), on a goroutine of its own while its parent
// waits in b.Run) is counted alone too.
// The figures are in summary.json, bench.txt and a profile by function and
// line: the loop's lines hold its instructions.
func TestBenchInstructions(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	bin := filepath.Join(t.TempDir(), "insbench.test")
	if out, err := exec.Command("go", "test", "-c", "-o", bin, "./testdata/insbench").CombinedOutput(); err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	const fn = "github.com/perfspy/perfspy/probe/testdata/insbench.burn"
	loop := float64(loopLengthOf(t, bin, fn))
	out := filepath.Join(t.TempDir(), "out")
	var o, e bytes.Buffer
	code := mainBenchArgs(context.Background(), t, io.Discard, &o, &e, "-bench", ".", "-instructions", "-retained=false", "-copies", "off", "-offcpu=false", "-syscalls", "off", "-out", out, "./testdata/insbench")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s%s", code, o.String(), e.String())
	}
	var s schema.BenchSummary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	ins := map[int]float64{}
	for _, b := range s.Benchmarks {
		if b.PerOp.Instructions == nil || b.InstructionsOps <= 0 {
			t.Fatalf("%s: per_op.instructions %v, instructions_ops %d", b.Name, b.PerOp.Instructions, b.InstructionsOps)
		}
		n := 1000
		switch {
		case strings.HasPrefix(b.Name, "BenchmarkBurn3000"):
			n = 3000
		case strings.HasPrefix(b.Name, "BenchmarkBurnSub/n=2000"):
			n = 2000
		}
		ins[n] = *b.PerOp.Instructions
		p, err := readProfile(filepath.Join(out, b.Files["instructions"]))
		if err != nil {
			t.Fatal(err)
		}
		// By line: burn's loop is lines 12 and 13 of insbench.go.
		var self, loopLines int64
		for _, smp := range p.Sample {
			if leafName(smp) == fn {
				self += smp.Value[0]
				ln := smp.Location[0].Line[0]
				if !strings.HasSuffix(ln.Function.Filename, "testdata/insbench/insbench.go") {
					t.Errorf("%s: burn's instructions at %s:%d", b.Name, ln.Function.Filename, ln.Line)
				}
				if ln.Line == 12 || ln.Line == 13 {
					loopLines += smp.Value[0]
				}
			}
		}
		if float64(loopLines) < float64(n)*loop*float64(b.InstructionsOps) {
			t.Errorf("%s: lines 12-13 (the loop) hold %d instructions over %d ops, want %d iterations of %v each", b.Name, loopLines, b.InstructionsOps, n, loop)
		}
		perOp := float64(self) / float64(b.InstructionsOps)
		t.Logf("%s: %.2f instructions/op over %d ops; burn %.2f/op, its loop %v instructions", b.Name, ins[n], b.InstructionsOps, perOp, loop)
		if perOp < float64(n)*loop || perOp > float64(n)*loop+40 {
			t.Errorf("%s: burn's own %.2f instructions/op, want %d iterations of %v and a few (the set-up's 50,000 not in it)", b.Name, perOp, n, loop)
		}
	}
	if d := (ins[3000] - ins[1000]) / 2000; math.Abs(d-loop) > 0.005*loop {
		t.Errorf("(%.2f - %.2f) / 2000 = %.4f instructions per iteration, the disassembly's loop has %v", ins[3000], ins[1000], d, loop)
	}
	if b := readFile(t, filepath.Join(out, "bench.txt")); !strings.Contains(b, "instructions/op") {
		t.Errorf("bench.txt has no instructions/op:\n%s", b)
	}
	if s.Sources["instructions"] == "" {
		t.Errorf("sources %v: want instructions", s.Sources)
	}
	if r := readFile(t, filepath.Join(out, "report.md")); !strings.Contains(r, "instructions per op (of ") {
		t.Errorf("report.md has no instructions table")
	}
}

// TestBenchInstructionsRefused: where callgrind cannot count (an
// emulator), -instructions is refused before any build, naming why.
func TestBenchInstructionsRefused(t *testing.T) {
	err := instructionsRunnable(BenchConfig{Exec: []string{"qemu-aarch64-static"}})
	if err == nil || !strings.Contains(err.Error(), "-instructions: not with -exec qemu-aarch64-static") {
		t.Errorf("-exec: %v", err)
	}
	if got := benchPattern("BenchmarkA/sub.x"); got != `^BenchmarkA$/^sub\.x$` {
		t.Errorf("pattern %q", got)
	}
	for names, want := range map[string]string{
		"BenchmarkA-4 BenchmarkB/n-2-4": "-4",
		"BenchmarkA BenchmarkB/n-2":     "", // GOMAXPROCS 1: no suffix, whatever a sub-benchmark's name ends with
		"BenchmarkA-2":                  "-2",
	} {
		if got := sharedProcsSuffix(strings.Fields(names)); got != want {
			t.Errorf("sharedProcsSuffix(%s) = %q, want %q", names, got, want)
		}
	}
	for _, c := range []struct {
		perOp, ns float64
		want      int
	}{
		{1e9, 1e6, 1},         // 10^9 instructions an op: one
		{5000, 1000, 4000},    // 2 x 10^7 instructions
		{1, 1, 1e7},           // at most 10^7 ops
		{5000, 1e6, 200},      // 200 ms of plain ops
		{1e6, math.NaN(), 20}, // no plain time: the budget alone
	} {
		if n := insOpsFor(c.perOp, c.ns); n != c.want {
			t.Errorf("insOpsFor(%v, %v) = %d, want %d", c.perOp, c.ns, n, c.want)
		}
	}
	if n := insProbeOps(6.7e8); n != 1 {
		t.Errorf("a probe of an op of 0.67 s: %d ops, want 1", n)
	}
	if n := insProbeOps(100); n != 20 {
		t.Errorf("a probe of an op of 100 ns: %d ops, want 20", n)
	}
}
