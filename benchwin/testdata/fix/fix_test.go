// Package fix holds benchmarks whose per-op cost is known: benchwin's
// and probe's tests measure them.
package fix

import (
	"syscall"
	"testing"
	"time"
)

var (
	sink     any
	sinkB    []byte
	src, dst = make([]byte, 4096), make([]byte, 8192)
	copyLen  = 4096 // a variable: the compiler cannot inline the copy
)

type obj48 struct{ a, b, c, d, e, f *int }

// BenchmarkSetup: 1 allocation of 48 B per op in the timed region; set-up
// before ResetTimer and work between StopTimer and StartTimer allocate too.
func BenchmarkSetup(b *testing.B) {
	for range 1000 {
		sink = new([64]byte)
	}
	b.ResetTimer()
	for range b.N {
		sink = new(obj48)
		b.StopTimer()
		sink = new([256]byte)
		sink = new([256]byte)
		sink = new([256]byte)
		b.StartTimer()
	}
}

// BenchmarkLoop: b.Loop, 2 allocations per op (48 B and 1024 B).
func BenchmarkLoop(b *testing.B) {
	for range 100 {
		sink = new([64]byte)
	}
	for b.Loop() {
		sink = new(obj48)
		sinkB = make([]byte, copyLen/4)
	}
}

// BenchmarkCopy: one copy of 4096 B per op, no allocation.
func BenchmarkCopy(b *testing.B) {
	for range b.N {
		copy(dst[:copyLen], src[:copyLen])
	}
}

// BenchmarkSyscall: one getppid per op.
func BenchmarkSyscall(b *testing.B) {
	for range b.N {
		syscall.Getppid()
	}
}

// BenchmarkSub: sub-benchmarks of 16 B and 1024 B, one allocation each per op.
func BenchmarkSub(b *testing.B) {
	for _, n := range []int{16, 1024} {
		name := "small"
		if n > 16 {
			name = "big"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				sinkB = make([]byte, n)
			}
		})
	}
}

// BenchmarkMap: sub-benchmarks named from a map, so in another order in
// each run; each makes one allocation of its size per op.
func BenchmarkMap(b *testing.B) {
	for name, n := range map[string]int{"m32": 32, "m64": 64, "m128": 128, "m256": 256, "m512": 512} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				sinkB = make([]byte, n)
			}
		})
	}
}

// BenchmarkParallel: RunParallel, one allocation of 48 B per op.
func BenchmarkParallel(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			sink = new(obj48)
		}
	})
}

// BenchmarkWait: each op sleeps 50 µs (off CPU, reason sleep).
func BenchmarkWait(b *testing.B) {
	for range b.N {
		time.Sleep(50 * time.Microsecond)
	}
}

// node is 256 bytes, one size class of its own.
type node struct {
	next *node
	pad  [248]byte
}

var (
	kept  *node
	never = make(chan struct{})
)

// keep puts one 256-byte object on a list that only grows.
//
//go:noinline
func keep() { kept = &node{next: kept} }

// BenchmarkLeak: each op keeps one 256-byte object (keep), and every 10th
// op starts a goroutine that never returns (stuck).
func BenchmarkLeak(b *testing.B) {
	for i := range b.N {
		keep()
		if i%10 == 0 {
			go stuck()
		}
	}
}

func stuck() { <-never }

// BenchmarkSkips skips, as a benchmark whose input file is missing does:
// it prints no result.
func BenchmarkSkips(b *testing.B) {
	b.Skip("its input is missing")
}
