package probe

import (
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// TestCountsDifferBeside: at the same b.N, go test's line and the counted
// run's differ by what the timed region allocated beside the ops (another
// goroutine's, the runtime's): the reason measures it from the counted
// run's profile and names where, instead of "the op's cost depends on
// b.N" (said when both runs had b.N = 2000).
func TestCountsDifferBeside(t *testing.T) {
	fn := func(id uint64, name string) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: &profile.Function{ID: id, Name: name}}}}
	}
	op, runner, bg, malg := fn(1, "example.com/x.BenchmarkOp"), fn(2, runN), fn(3, "example.com/x.background"), fn(4, "runtime.malg")
	p := &profile.Profile{Sample: []*profile.Sample{
		{Location: []*profile.Location{op, runner}, Value: []int64{2000, 96000}},
		{Location: []*profile.Location{bg}, Value: []int64{30, 40960}},
		{Location: []*profile.Location{malg}, Value: []int64{2, 512}},
	}}
	b := besideOf(p)
	if b.allocs != 32 || b.bytes != 41472 || b.top != "example.com/x.background" {
		t.Fatalf("beside the ops: %+v, want 32 allocs, 41472 B, most in example.com/x.background", b)
	}
	f := &BenchFigures{}
	why := countsDifferWhy(f, 2000, 2000, b)
	for _, want := range []string{"32 allocs, 41472 B beside its ops", "most in example.com/x.background", "20.74 B an op"} {
		if !strings.Contains(why, want) {
			t.Errorf("same b.N: %q lacks %q", why, want)
		}
	}
	if strings.Contains(why, "depends on b.N") {
		t.Errorf("same b.N: %q blames b.N", why)
	}
	if why := countsDifferWhy(f, 2000, 2000, besideOps{}); strings.Contains(why, "depends on b.N") || !strings.Contains(why, "go test's run did work beside its ops") {
		t.Errorf("same b.N, nothing beside: %q", why)
	}
	if why := countsDifferWhy(f, 5000, 2000, besideOps{}); !strings.Contains(why, "depends on b.N") {
		t.Errorf("another b.N, nothing beside: %q", why)
	}
}
