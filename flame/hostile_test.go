package flame

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfspy/perfspy/internal/limits"
)

// gzipZeros is n zero bytes, gzipped: a megabyte inflates to a gigabyte.
func gzipZeros(t testing.TB, n int) []byte {
	var b bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for ; n > 0; n -= len(zeros) {
		gz.Write(zeros[:min(n, len(zeros))])
	}
	gz.Close()
	return b.Bytes()
}

// TestGzipBomb: an input that inflates past the limit stops at the
// limit, with an error that names it and its flag.
func TestGzipBomb(t *testing.T) {
	bomb := gzipZeros(t, 64<<20)
	_, err := Read(bytes.NewReader(bomb), Options{MaxBytes: 8 << 20})
	var le *limits.Error
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "-max-profile-size") {
		t.Fatalf("Read of 64 MiB of zeros with an 8 MiB limit: %v, want a limit error naming -max-profile-size", err)
	}
	// Gzipped folded stacks are bounded the same way.
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	for range 1 << 16 {
		gz.Write([]byte("main;a;b;c;d;e 1\n"))
	}
	gz.Close()
	if _, err := Read(bytes.NewReader(b.Bytes()), Options{MaxBytes: 1 << 20}); !errors.As(err, &le) {
		t.Errorf("gzipped folded stacks over the limit: %v", err)
	}
	if _, err := Read(bytes.NewReader(b.Bytes()), Options{}); err != nil {
		t.Errorf("the same under the default limit: %v", err)
	}
}

// TestDeepStack: a stack deeper than the limit is an error naming
// -max-depth, not a stack overflow of the tree's walks.
func TestDeepStack(t *testing.T) {
	line := strings.Repeat("f;", 200_000) + "g 1\n"
	_, err := Read(strings.NewReader(line), Options{})
	if err == nil || !strings.Contains(err.Error(), "-max-depth") || !strings.Contains(err.Error(), "200001 frames") {
		t.Fatalf("a 200001-frame line: %v, want an error naming -max-depth and the frames", err)
	}
	tr, err := Read(strings.NewReader(line), Options{MaxDepth: 300_000})
	if err != nil {
		t.Fatalf("with -max-depth 300000: %v", err)
	}
	var svg, html bytes.Buffer
	if err := WriteSVG(&svg, tr, SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, tr, ""); err != nil {
		t.Fatal(err)
	}
}

// TestLongFirstLine: a first folded line over the 1 MiB that classify
// peeks is still read (the folded reader takes 64 MiB lines).
func TestLongFirstLine(t *testing.T) {
	line := strings.Repeat("frame_with_a_long_name;", 60_000) + "leaf 7\nmain;x 3\n" // 1.4 MB
	tr, err := Read(strings.NewReader(line), Options{MaxDepth: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Root.Total != 10 {
		t.Errorf("root %d, want 10", tr.Root.Total)
	}
}

// TestNotAFile: a folder and a truncated gzip are named as what they
// are, not "empty input".
func TestNotAFile(t *testing.T) {
	dir := t.TempDir()
	var o, e bytes.Buffer
	if code := Command([]string{dir}, &o, &e); code != 1 || !strings.Contains(e.String(), "is a folder") {
		t.Errorf("flame FOLDER: exit %d, %q", code, e.String())
	}
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	gz.Write(bytes.Repeat([]byte("main;a 1\n"), 1000))
	gz.Close()
	cut := filepath.Join(dir, "cut.folded.gz")
	os.WriteFile(cut, b.Bytes()[:20], 0o644)
	e.Reset()
	if code := Command([]string{cut}, &o, &e); code != 1 || !strings.Contains(e.String(), "cut short") {
		t.Errorf("flame on a truncated gzip: exit %d, %q", code, e.String())
	}
	// A FIFO no one writes: refused at once, not an open() that waits
	// for ever, deaf to Ctrl-C.
	fifo := filepath.Join(dir, "cpu.pb.gz")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	e.Reset()
	done := make(chan int, 1)
	go func() { done <- Command([]string{fifo}, &o, &e) }()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(e.String(), fifo+" is not a regular file (a FIFO)") {
			t.Errorf("flame FIFO: exit %d, %q", code, e.String())
		}
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil { // let a blocked open return
			f.Close()
		}
		t.Fatal("flame on a FIFO blocked")
	}
}

// TestOutputIsInput: -o naming an input (or a link to it) is refused, and
// the input is kept.
func TestOutputIsInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.svg") // folded stacks, told by their content
	src := []byte("main;a 1\n")
	os.WriteFile(in, src, 0o644)
	link := filepath.Join(dir, "link.svg")
	os.Symlink(in, link)
	for _, out := range []string{in, link} {
		var o, e bytes.Buffer
		if code := Command([]string{"-o", out, in}, &o, &e); code != 2 || !strings.Contains(e.String(), "refusing to overwrite") {
			t.Errorf("flame -o %s %s: exit %d, %q", filepath.Base(out), filepath.Base(in), code, e.String())
		}
	}
	if b, _ := os.ReadFile(in); !bytes.Equal(b, src) {
		t.Error("the input was changed")
	}
}
