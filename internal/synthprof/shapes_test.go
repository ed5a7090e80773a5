package synthprof

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// A shape's profile is what it says: the samples, depths and sample
// types asked for, every location's frames named, and the same bytes
// from the same seeds.
func TestShapeProfile(t *testing.T) {
	for _, name := range []string{"deep", "locations-1M"} {
		sh, _ := ShapeNamed(name)
		sh.Samples = 3000
		g := NewGraph(1, 2000)
		var b, again bytes.Buffer
		if err := g.WriteProfile(&b, 2, sh, []string{"alloc_objects/count", "alloc_space/bytes"}); err != nil {
			t.Fatal(err)
		}
		g.WriteProfile(&again, 2, sh, []string{"alloc_objects/count", "alloc_space/bytes"})
		if !bytes.Equal(b.Bytes(), again.Bytes()) {
			t.Errorf("%s: two profiles from the same seeds differ", name)
		}
		p, err := profile.Parse(&b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(p.Sample) != sh.Samples || len(p.SampleType) != 2 || p.SampleType[1].Unit != "bytes" {
			t.Fatalf("%s: %d samples, types %v", name, len(p.Sample), p.SampleType)
		}
		stacks := map[string]bool{}
		for _, s := range p.Sample {
			if len(s.Location) < sh.MinDepth || len(s.Location) > sh.MaxDepth {
				t.Fatalf("%s: a stack of %d locations", name, len(s.Location))
			}
			var k strings.Builder
			for _, l := range s.Location {
				if len(l.Line) == 0 || !strings.Contains(l.Line[0].Function.Name, ".") {
					t.Fatalf("%s: location %d has no Go function", name, l.ID)
				}
				k.WriteString(l.Line[0].Function.Name + ";")
			}
			stacks[k.String()] = true
		}
		// Distinct stacks, and shared prefixes: fewer roots than samples.
		roots := map[string]bool{}
		for _, s := range p.Sample {
			ln := s.Location[len(s.Location)-1].Line
			roots[ln[len(ln)-1].Function.Name] = true
		}
		if len(stacks) < sh.Samples/2 || len(roots) > 16 {
			t.Errorf("%s: %d distinct stacks of %d samples, %d root locations", name, len(stacks), sh.Samples, len(roots))
		}
		if sh.FreshLeaves && len(p.Location) < sh.Samples {
			t.Errorf("%s: %d locations for %d samples with fresh leaves", name, len(p.Location), sh.Samples)
		}
	}
}

func TestShapeFolded(t *testing.T) {
	sh, _ := ShapeNamed("folded")
	sh.FoldedLines = 500
	var b bytes.Buffer
	n, err := NewGraph(3, 1000).WriteFolded(&b, 4, sh)
	if err != nil || n != int64(b.Len()) {
		t.Fatal(n, err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 500 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		stack, _, ok := strings.Cut(l, " ")
		if d := strings.Count(stack, ";") + 1; !ok || d < sh.MinDepth {
			t.Fatalf("line %q", l)
		}
	}
}

// TestRandomWalk: the random-walk shape's stacks part ways at once (every
// callee alike): of 2,000 walks, far more distinct 6-frame prefixes than
// the deep shape's hot paths give.
func TestRandomWalk(t *testing.T) {
	g := NewGraph(3, 1000)
	prefixes := func(name string) int {
		sh, _ := ShapeNamed(name)
		sh.FoldedLines = 2000
		var b bytes.Buffer
		if _, err := g.WriteFolded(&b, 4, sh); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if parts := strings.SplitN(l, ";", 7); len(parts) == 7 {
				seen[strings.Join(parts[:6], ";")] = true
			}
		}
		return len(seen)
	}
	deep, walk := prefixes("deep"), prefixes("random-walk")
	if 2*walk < 3*deep {
		t.Errorf("distinct 6-frame prefixes: random-walk %d, deep %d; want half as many again at least", walk, deep)
	}
}
