package insbench

import "testing"

// BenchmarkBurn1000 uses b.Loop; its set-up before the loop is paid once
// a call, not per op.
func BenchmarkBurn1000(b *testing.B) {
	sink = burn(50000) // set-up
	for b.Loop() {
		sink = burn(1000)
	}
}

// BenchmarkBurn3000 uses b.N, with a set-up before ResetTimer.
func BenchmarkBurn3000(b *testing.B) {
	sink = burn(50000)
	b.ResetTimer()
	for range b.N {
		sink = burn(3000)
	}
}

// BenchmarkBurnSub runs burn(2000) in a sub-benchmark, on a goroutine of
// its own while its parent waits in b.Run.
func BenchmarkBurnSub(b *testing.B) {
	sink = burn(50000)
	b.Run("n=2000", func(b *testing.B) {
		for b.Loop() {
			sink = burn(2000)
		}
	})
}
