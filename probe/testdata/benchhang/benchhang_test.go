// Package benchhang holds a benchmark that returns and one that never
// does: the run probe's -bench-timeout stops, naming it.
package benchhang

import (
	"testing"
	"time"
)

var sink any

// BenchmarkAReturns: one allocation per op.
func BenchmarkAReturns(b *testing.B) {
	for range b.N {
		sink = new([6]int64)
	}
}

// BenchmarkHangs never returns (a deadlock, a wait for a server that is
// not there).
func BenchmarkHangs(b *testing.B) {
	time.Sleep(24 * time.Hour)
}
