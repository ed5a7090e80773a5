// Package cutrun holds a benchmark that is quick, and one that is quick
// everywhere but in probe's traced run (the execution tracer on), where
// it waits a minute: the run that probe bounds or a user interrupts.
package cutrun

import (
	"runtime/trace"
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

// BenchmarkHeavyTraced waits a minute in a traced run, as a set-up of
// many goroutines can take that long under the tracer.
func BenchmarkHeavyTraced(b *testing.B) {
	if trace.IsEnabled() {
		time.Sleep(time.Minute)
	}
	for range b.N {
		sink = new([6]int64)
	}
}
