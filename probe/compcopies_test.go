package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestCompilerCopied: structs copied by value, which never reach memmove,
// are compiler-copied-B/op under -instructions, to the byte: 16 rows of
// 176 B an op (vector moves), 2 blocks of 2400 B (REP; MOVSQ), none for a
// benchmark that copies nothing; their profile puts the bytes on the
// assigning line, and copied-B/op (memmove) does not see them.
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
	}{"BenchmarkRows": {16 * 176, 21}, "BenchmarkBlocks": {2 * 2400, 28}, "BenchmarkNone": {0, 0}}
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
		if b.PerOp.CopiedBytes != nil && *b.PerOp.CopiedBytes >= 16 {
			t.Errorf("%s: memmove saw %v B/op of the compiler's copies", b.Name, *b.PerOp.CopiedBytes)
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
