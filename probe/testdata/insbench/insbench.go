// Package insbench holds benchmarks of known instructions per op: a loop
// whose body the disassembly counts, run 1,000 and 3,000 times an op.
package insbench

var sink int

// burn runs its loop n times.
//
//go:noinline
func burn(n int) int {
	x := 1
	for i := 0; i < n; i++ {
		x = x*1664525 + i
	}
	return x
}
