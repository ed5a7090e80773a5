package cost

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/synthprof"
)

// A reader's row says each goal met or not, from the figures.
func TestReaderRow(t *testing.T) {
	sh, _ := synthprof.ShapeNamed("locations-1M")
	for _, c := range []struct {
		r    row
		tool string
		want []string
	}{
		{row{sh: sh, secs: 1, mb: 200, refSecs: 11, refMB: 1000}, "flame", []string{"speed-up >= 10x met", "memory <= 0.33 met", "<= 3 s met", "<= 500 MB met"}},
		{row{sh: sh, secs: 1, mb: 600, refSecs: 9, refMB: 1000}, "flame", []string{"speed-up >= 10x NOT MET", "memory <= 0.33 NOT MET", "<= 500 MB NOT MET"}},
		{row{sh: sh, secs: 6, mb: 200, refSecs: 70, refMB: 3000}, "allocdiff", []string{"<= 5 s NOT MET"}},
	} {
		var b strings.Builder
		c.r.write(&b, c.tool)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: %q lacks %q", c.tool, b.String(), w)
			}
		}
	}
	folded, _ := synthprof.ShapeNamed("folded")
	var b strings.Builder
	row{sh: folded, secs: 1, mb: 100, refSecs: 46.5, refMB: 1756, recorded: true}.write(&b, "flame")
	if !strings.Contains(b.String(), "speed-up >= 50x NOT MET") || !strings.Contains(b.String(), "not on PATH") {
		t.Errorf("folded: %q", b.String())
	}
}

// A shape that is not one is a usage error; allocdiff has no folded
// input.
func TestShapeFlag(t *testing.T) {
	c := Command{Name: "probe", Benches: []Bench{Allocdiff, Flame}, Defaults: "flame"}
	if code := Main(context.Background(), c, []string{"-shape", "wide"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("-shape wide: exit %d, want 2", code)
	}
	if got := strings.Join(ReaderShapes("allocdiff"), ","); got != "deep,random-walk,shallow-1M,locations-1M" {
		t.Errorf("allocdiff's shapes: %s", got)
	}
	var errb strings.Builder
	if code := Main(context.Background(), c, []string{"-what", "allocdiff", "-shape", "folded"}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "want one of deep") {
		t.Errorf("allocdiff -shape folded: exit %d, %s", code, errb.String())
	}
}

// TestRunPhases: probe's progress lines split its run into phases, each
// from its line to the next's, the last to the exit.
func TestRunPhases(t *testing.T) {
	script := filepath.Join(t.TempDir(), "fakeprobe")
	body := "#!/bin/sh\necho 'probe: building the tests' >&2\nsleep 0.1\necho 'probe: timing the benchmarks with the plain test binary' >&2\nsleep 0.3\n" +
		"echo 'probe: counting the benchmarks timed regions' >&2\necho 'probe: writing /x' >&2\nsleep 0.1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	phases := map[string][]float64{}
	if err := runPhases(context.Background(), t.TempDir(), script, nil, phases); err != nil {
		t.Fatal(err)
	}
	if len(phases["build"]) != 1 || len(phases["plain"]) != 1 || len(phases["counted"]) != 1 || len(phases["writing"]) != 1 || len(phases) != 4 {
		t.Fatalf("phases %v", phases)
	}
	if p := phases["plain"][0]; p < 0.25 || p > 2 {
		t.Errorf("plain %.2f s, want about 0.3", p)
	}
	if b := phases["build"][0]; b < 0.05 || b > 2 {
		t.Errorf("build %.2f s, want about 0.1", b)
	}
}
