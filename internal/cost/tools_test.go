package cost

import (
	"context"
	"io"
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
	if got := strings.Join(ReaderShapes("allocdiff"), ","); got != "deep,shallow-1M,locations-1M" {
		t.Errorf("allocdiff's shapes: %s", got)
	}
	var errb strings.Builder
	if code := Main(context.Background(), c, []string{"-what", "allocdiff", "-shape", "folded"}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "want one of deep") {
		t.Errorf("allocdiff -shape folded: exit %d, %s", code, errb.String())
	}
}
