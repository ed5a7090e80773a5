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

// TestCompilerCopied: structs copied by value, which never reach memmove,
// are compiler-copied-B/op under -instructions, to the byte: 16 rows of
// 176 B an op (vector moves), 2 blocks of 2400 B (REP; MOVSQ), none for a
// benchmark that copies nothing and none for a slice's copy (memmove's
// own vector stores are copied-B/op's, 256 B, not counted twice); their
// profile puts the bytes on the assigning line, and copied-B/op
// (memmove) does not see them.
func TestCompilerCopied(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("skipped: valgrind is not installed (Debian package valgrind)")
	}
	out := filepath.Join(t.TempDir(), "out")
	var o, e bytes.Buffer
	code := mainBenchArgs(context.Background(), t, io.Discard, &o, &e, "-bench", ".", "-benchtime", "200x", "-instructions", "-retained=false", "-offcpu=false", "-syscalls", "off", "-out", out, "./testdata/copybench")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s%s", code, o.String(), e.String())
	}
	var s schema.BenchSummary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "summary.json"))), &s); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		bytes float64
		line  int
	}{"BenchmarkRows": {16 * 176, srcLine(t, "kept = rows[i]")}, "BenchmarkBlocks": {2 * 2400, srcLine(t, "outs[i] = blocks[i]")}, "BenchmarkNone": {0, 0}, "BenchmarkMemmove": {0, 0}}
	for _, b := range s.Benchmarks {
		name, _, _ := strings.Cut(b.Name, "-")
		w, ok := want[name]
		if !ok {
			t.Fatalf("a benchmark %s", b.Name)
		}
		if b.PerOp.CompilerCopiedBytes == nil {
			t.Fatalf("%s: no compiler_copied_bytes", b.Name)
		}
		if got := *b.PerOp.CompilerCopiedBytes; got != w.bytes {
			t.Errorf("%s: %v compiler-copied B/op, want %v", b.Name, got, w.bytes)
		}
		// memmove sees none of the compiler's copies, and its own vector
		// loop is not the compiler's: the slice's 256 bytes are
		// copied-B/op alone.
		wantMove := 0.0
		if name == "BenchmarkMemmove" {
			wantMove = 256
		}
		if b.PerOp.CopiedBytes == nil || math.Abs(*b.PerOp.CopiedBytes-wantMove) >= 16 {
			t.Errorf("%s: copied-B/op (memmove) %v, want %v", b.Name, b.PerOp.CopiedBytes, wantMove)
		}
		if w.line == 0 {
			continue
		}
		p, err := readProfile(filepath.Join(out, b.Files["compiler_copies"]))
		if err != nil {
			t.Fatal(err)
		}
		var onLine, all int64
		for _, smp := range p.Sample {
			all += smp.Value[0]
			if l := smp.Location[0].Line[0]; strings.HasSuffix(l.Function.Filename, "copybench.go") && int(l.Line) == w.line {
				onLine += smp.Value[0]
			}
		}
		if all == 0 || onLine != all {
			t.Errorf("%s: %d of %d bytes on copybench.go:%d", b.Name, onLine, all, w.line)
		}
	}
	if !strings.Contains(readFile(t, filepath.Join(out, "bench.txt")), "compiler-copied-B/op") {
		t.Errorf("bench.txt lacks compiler-copied-B/op")
	}
}

// srcLine is the line of copybench.go that holds text.
func srcLine(t *testing.T, text string) int {
	t.Helper()
	for i, l := range strings.Split(readFile(t, "testdata/copybench/copybench.go"), "\n") {
		if strings.Contains(l, text) {
			return i + 1
		}
	}
	t.Fatalf("copybench.go has no %q", text)
	return 0
}
