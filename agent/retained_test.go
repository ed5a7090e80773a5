package agent_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/agent"
	"github.com/perfspy/perfspy/agent/wire"
)

type node struct {
	next *node
	_    [248]byte
}

var (
	kept  *node
	sink  *node
	never = make(chan struct{})
)

//go:noinline
func keepOne() { kept = &node{next: kept} }

//go:noinline
func garbage() { sink = &node{} }

func stuck() { <-never }

// TestRetainedSince: 100 objects kept are 100 objects and 25600 B at their
// site; garbage is nothing; a goroutine blocked for good leaves neither
// its sudog nor its runtime record among the sites.
func TestRetainedSince(t *testing.T) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	since := agent.RetainedSince()
	n := runtime.NumGoroutine()
	for range 100 {
		keepOne()
		garbage()
	}
	sink = nil
	go stuck()
	for runtime.NumGoroutine() == n {
		runtime.Gosched()
	}
	time.Sleep(10 * time.Millisecond) // stuck blocks: its sudog is taken
	r := since()
	var objects, bytes int64
	for _, s := range r.Sites {
		user, _ := wire.UserStack(s.Stack)
		leaf := user[0].Frames[0].Func
		switch {
		case strings.HasSuffix(leaf, ".keepOne"):
			objects += s.Objects
			bytes += s.Bytes
		case strings.HasSuffix(leaf, ".garbage"):
			t.Errorf("garbage retained: %+v", s)
		}
		for _, pf := range s.Stack {
			for _, f := range pf.Frames {
				if f.Func == "runtime.acquireSudog" || f.Func == "runtime.malg" {
					t.Errorf("a runtime record retained: %s in %+v", f.Func, s)
				}
			}
		}
	}
	if objects != 100 || bytes != 25600 {
		t.Errorf("keepOne: %d objects, %d B retained; want 100 and 25600 (sites %+v)", objects, bytes, r.Sites)
	}
}
