// Package cutrun holds a benchmark that is quick, and one that is quick
// everywhere but in probe's retained run (MemProfileRate=1), where it
// waits a minute: the run that probe bounds or a user interrupts.
package cutrun

import (
	"runtime"
	"testing"
	"time"
)

var sink any

// BenchmarkQuick: one 48-byte allocation per op.
func BenchmarkQuick(b *testing.B) {
	for range b.N {
		sink = new([6]int64)
	}
}

// BenchmarkHeavyRetained waits a minute in a run at MemProfileRate=1, as
// a set-up of many objects can take that long under it.
func BenchmarkHeavyRetained(b *testing.B) {
	if runtime.MemProfileRate == 1 {
		time.Sleep(time.Minute)
	}
	for range b.N {
		sink = new([6]int64)
	}
}
