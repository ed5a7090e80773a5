package probe

import (
	"bytes"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/synthprof"
)

// TestSubtractAsCopies holds subtract and diffProfiles, which copy only
// the samples of their inputs, to what they made when they copied whole
// profiles (encoded and decoded, profile.Copy) before changing them: the
// same samples, stacks and values, and the inputs left as they were.
// Two profiles drawn from one call graph share most stacks; some values
// are made equal so that samples cancel, and a runN frame cut where a
// stack passes one.
func TestSubtractAsCopies(t *testing.T) {
	g := synthprof.NewGraph(7, 400)
	sh := synthprof.Shape{Name: "t", Samples: 3000, MinDepth: 3, MaxDepth: 12, Funcs: 400}
	read := func(seed int64) *profile.Profile {
		var b bytes.Buffer
		if err := g.WriteProfile(&b, seed, sh, []string{"alloc_objects/count", "alloc_space/bytes"}); err != nil {
			t.Fatal(err)
		}
		p, err := profile.Parse(&b)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// b: a's samples, a third of them equal (they cancel), a third with
	// other values, a third left out; and stacks of a second draw.
	a := read(1)
	b := a.Copy()
	kept := b.Sample[:0]
	for i, s := range b.Sample {
		switch i % 3 {
		case 0:
			kept = append(kept, s)
		case 1:
			s.Value[0], s.Value[1] = s.Value[0]*2+1, s.Value[1]+7
			kept = append(kept, s)
		}
	}
	b.Sample = kept
	b, err := profile.Merge([]*profile.Profile{b.Compact(), read(2)})
	if err != nil {
		t.Fatal(err)
	}
	// A frame named runN in some stacks: diffProfiles cuts after it.
	for _, f := range a.Function[:5] {
		f.Name = runN
	}
	wantA, wantB := a.Copy().String(), b.Copy().String()

	refSub := func(a, b *profile.Profile) *profile.Profile {
		neg := b.Copy()
		neg.Scale(-1)
		d, err := profile.Merge([]*profile.Profile{a.Copy(), neg})
		if err != nil {
			t.Fatal(err)
		}
		kept := d.Sample[:0]
		for _, s := range d.Sample {
			if s.Value[0] != 0 || s.Value[1] != 0 {
				kept = append(kept, s)
			}
		}
		d.Sample = kept
		return d.Compact()
	}
	refDiff := func(a, b *profile.Profile) *profile.Profile {
		a, b = a.Copy(), b.Copy()
		endAtRunN(a)
		endAtRunN(b)
		d := refSub(a, b)
		d.Comments = nil
		return d
	}
	got, err := subtract(a, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := refSub(a, b); got.String() != want.String() {
		t.Errorf("subtract differs from the whole-copy subtraction:\n%.2000s\nwant\n%.2000s", got, want)
	}
	if len(got.Sample) == 0 || len(got.Sample) >= len(a.Sample)+len(b.Sample) {
		t.Errorf("subtract kept %d samples of %d and %d: nothing cancelled or everything did", len(got.Sample), len(a.Sample), len(b.Sample))
	}
	gotD, err := diffProfiles(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := refDiff(a, b); gotD.String() != want.String() {
		t.Errorf("diffProfiles differs from the whole-copy one:\n%.2000s\nwant\n%.2000s", gotD, want)
	}
	if gotD.String() == got.String() {
		t.Error("no stack was cut at runN: the test checks nothing of endAtRunN")
	}
	if a.String() != wantA || b.String() != wantB {
		t.Error("subtract or diffProfiles changed an input")
	}
	// A drop that removes samples: the locations only they named go.
	dropped, err := subtract(a, b, func(s *profile.Sample) bool { return s.Value[0] > 0 })
	if err != nil {
		t.Fatal(err)
	}
	used := map[*profile.Location]bool{}
	for _, s := range dropped.Sample {
		if s.Value[0] > 0 {
			t.Fatalf("a dropped sample is left: %v", s.Value)
		}
		for _, l := range s.Location {
			used[l] = true
		}
	}
	if len(used) != len(dropped.Location) {
		t.Errorf("after a drop: %d locations, %d named by a sample", len(dropped.Location), len(used))
	}
}
