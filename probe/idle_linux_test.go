package probe

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestIdleThread: the stream's worker thread runs at the idle policy, and
// normalThread (halt's, from another thread) gives it the normal one
// back, so that halt never waits on a thread that busy cores starve.
func TestIdleThread(t *testing.T) {
	type got struct {
		idle, normal uint32
		err          error
	}
	ch := make(chan got)
	go func() {
		// Ends locked: its thread, at whatever policy, exits with it.
		tid, err := idleThread()
		if err != nil {
			ch <- got{err: err}
			return
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			ch <- got{err: err}
			return
		}
		done := make(chan struct{})
		go func() { normalThread(tid); close(done) }()
		<-done
		b, err := unix.SchedGetAttr(tid, 0)
		ch <- got{a.Policy, b.Policy, err}
	}()
	g := <-ch
	if g.err != nil {
		t.Fatal(g.err)
	}
	if g.idle != unix.SCHED_IDLE || g.normal != unix.SCHED_NORMAL {
		t.Errorf("policies %d then %d, want SCHED_IDLE (%d) then SCHED_NORMAL (%d)", g.idle, g.normal, unix.SCHED_IDLE, unix.SCHED_NORMAL)
	}
}
