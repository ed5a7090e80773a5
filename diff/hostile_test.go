package diff

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/synthprof"
)

// TestLoadBomb: a gzipped profile that inflates past -max-profile-size
// is refused with the limit and the flag named.
func TestLoadBomb(t *testing.T) {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	zeros := make([]byte, 1<<20)
	for range 64 {
		gz.Write(zeros)
	}
	gz.Close()
	dir := t.TempDir()
	bomb := filepath.Join(dir, "bomb.pb.gz")
	os.WriteFile(bomb, b.Bytes(), 0o644)
	var o, e bytes.Buffer
	code := Command([]string{"-max-profile-size", "8388608", bomb, bomb}, &o, &e)
	if code != 1 || !strings.Contains(e.String(), "-max-profile-size") || !strings.Contains(e.String(), "bomb.pb.gz") {
		t.Errorf("allocdiff on a gzip bomb: exit %d, %q", code, e.String())
	}
	e.Reset()
	if code := Command([]string{dir, bomb}, &o, &e); code != 1 || !strings.Contains(e.String(), "is a folder") {
		t.Errorf("allocdiff FOLDER: exit %d, %q", code, e.String())
	}
}

// TestOutputIsInput: allocdiff -o X X Y overwrote X; now it is refused
// and X is kept.
func TestOutputIsInput(t *testing.T) {
	dir := t.TempDir()
	x, y := filepath.Join(dir, "x.pb.gz"), filepath.Join(dir, "y.pb.gz")
	src := synthprof.Encode(synthprof.Synthetic(1, 20, []string{"alloc_objects/count", "alloc_space/bytes"}))
	os.WriteFile(x, src, 0o644)
	os.WriteFile(y, src, 0o644)
	hard := filepath.Join(dir, "hard.pb.gz")
	os.Link(y, hard)
	for _, out := range []string{x, hard} {
		var o, e bytes.Buffer
		if code := Command([]string{"-o", out, x, y}, &o, &e); code != 2 || !strings.Contains(e.String(), "refusing to overwrite") {
			t.Errorf("allocdiff -o %s x y: exit %d, %q", filepath.Base(out), code, e.String())
		}
	}
	if b, _ := os.ReadFile(x); !bytes.Equal(b, src) {
		t.Error("the input was overwritten")
	}
	var o, e bytes.Buffer
	if code := Command([]string{"-o", filepath.Join(dir, "d.pb.gz"), x, y}, &o, &e); code != 0 {
		t.Errorf("allocdiff -o NEW: exit %d, %s", code, e.String())
	}
}
