package diff

import (
	"bytes"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/synthprof"
	"github.com/perfspy/perfspy/profkey"
)

// BenchmarkCompare100k measures loading and comparing a pair of synthetic
// 100k-sample profiles; 'probe cost -what allocdiff' compares allocdiff
// with go tool pprof side by side.
func BenchmarkCompare100k(b *testing.B) {
	types := []string{"alloc_objects/count", "alloc_space/bytes"}
	bb, ab := synthprof.Encode(synthprof.Synthetic(1, 100000, types)), synthprof.Encode(synthprof.Synthetic(2, 100000, types))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bp, err := Parse(bb)
		if err != nil {
			b.Fatal(err)
		}
		ap, err := Parse(ab)
		if err != nil {
			b.Fatal(err)
		}
		r, err := Compare(&Side{Files: []string{"b"}, Profiles: []*profile.Profile{bp}, Requests: []int64{0}}, &Side{Files: []string{"a"}, Profiles: []*profile.Profile{ap}, Requests: []int64{0}}, Options{Folds: profkey.DefaultFolds})
		if err != nil {
			b.Fatal(err)
		}
		r.Write(&bytes.Buffer{}, "text", 20)
	}
}
