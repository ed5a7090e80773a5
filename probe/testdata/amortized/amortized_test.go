// Package amortized holds a benchmark whose allocations per op depend on
// b.N, and one whose do not: probe's counted run (a shorter -benchtime)
// names the first's difference from go test -benchmem, not the second's.
package amortized

import (
	"os"
	"runtime"
	"testing"
)

var (
	sink  any
	spinX int
)

// spin is about 20 µs of work that allocates nothing.
//
//go:noinline
func spin() {
	x := spinX
	for i := 0; i < 20000; i++ {
		x = x*1664525 + 1013904223
	}
	spinX = x
}

// BenchmarkAmortized: each run's first op builds 100,000 objects (a cache
// filled inside the timed region), then every op spins: allocs/op is
// 100,000 / b.N, so a run of fewer ops counts more per op.
func BenchmarkAmortized(b *testing.B) {
	for i := range b.N {
		if i == 0 {
			for range 100000 {
				sink = new(int64)
			}
		}
		spin()
	}
}

// BenchmarkSteady: one 48-byte allocation per op, whatever b.N.
func BenchmarkSteady(b *testing.B) {
	for range b.N {
		sink = new([6]int64)
		spin()
	}
}

// cache is built by the first op of the process, whichever run it is in.
var cache []byte

// BenchmarkCache: the process's first op builds a 1 MiB cache, then each
// op makes one 48-byte allocation. With b.Loop testing runs the function
// once, so the cache is in the timed region of the run reported: go test
// -benchmem spreads its MiB over b.N, once warm an op costs 1 and 48 B.
func BenchmarkCache(b *testing.B) {
	for b.Loop() {
		if cache == nil {
			cache = make([]byte, 1<<20)
		}
		sink = new([6]int64)
	}
}

// onDisk allocates a 64-byte buffer for each frame of its caller's stack
// whose source file is on disk, as a recovery handler that prints each
// frame's source line does: an op's cost depends on who calls it.
//
//go:noinline
func onDisk() {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if fi, err := os.Lstat(f.File); err == nil && fi.Mode().IsRegular() {
			sink = make([]byte, 64)
		}
		if !more {
			break
		}
	}
}

// BenchmarkCallers: testing's frames above the benchmark are files of
// GOROOT, on disk; a warm run reached through other frames costs another
// amount.
func BenchmarkCallers(b *testing.B) {
	for range b.N {
		onDisk()
	}
}

// BenchmarkCallersLoop is BenchmarkCallers with b.Loop: testing runs it
// from run1, not launch.
func BenchmarkCallersLoop(b *testing.B) {
	for b.Loop() {
		onDisk()
	}
}
