package wallclock

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/perfspy/perfspy/agent/wire"
)

//go:noinline
func parked(release chan struct{}) { <-release }

// TestSamplesBlockedGoroutine: a goroutine parked in a known function for
// the whole window is found in about Hz samples a second, and the report
// names its stack.
func TestSamplesBlockedGoroutine(t *testing.T) {
	release := make(chan struct{})
	go parked(release)
	defer close(release)
	s := &sampler{}
	if err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(); err == nil {
		t.Error("a second Begin did not fail")
	}
	time.Sleep(time.Second)
	path := filepath.Join(t.TempDir(), "wallclock.json")
	if err := s.End(path); err != nil {
		t.Fatal(err)
	}
	if err := s.End(path); err == nil {
		t.Error("End without Begin did not fail")
	}
	var rep wire.WallclockReport
	if err := wire.ReadJSON(path, &rep); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, smp := range rep.Samples {
		for _, pf := range smp.Stack {
			for _, f := range pf.Frames {
				if f.Func == "github.com/perfspy/perfspy/agent/wallclock.parked" {
					n += smp.Count
				}
			}
		}
	}
	// One sample per tick: Hz × seconds, less what a loaded machine's
	// late ticks cost.
	want := float64(Hz) * rep.Seconds
	if rep.Hz != Hz || float64(n) < 0.6*want || float64(n) > want+2 {
		t.Errorf("parked in %d samples over %.2fs at %d Hz, want about %.0f", n, rep.Seconds, rep.Hz, want)
	}
}
