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
