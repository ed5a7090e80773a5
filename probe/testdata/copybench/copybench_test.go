package copybench

import "testing"

func BenchmarkRows(b *testing.B) {
	for b.Loop() {
		copyRows()
	}
}

func BenchmarkBlocks(b *testing.B) {
	for b.Loop() {
		copyBlocks()
	}
}

func BenchmarkNone(b *testing.B) {
	for b.Loop() {
		count()
	}
}

func BenchmarkMemmove(b *testing.B) {
	for b.Loop() {
		copySlice()
	}
}
