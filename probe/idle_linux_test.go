package probe

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfspy/perfspy/internal/contain"
)

// TestIdleThread: the stream's worker thread runs at the idle policy,
// normalThread (halt's, from another thread) gives it the normal one
// back, so that halt never waits on a thread that busy cores starve, and
// release leaves the thread normal and alive.
func TestIdleThread(t *testing.T) {
	type got struct {
		idle, normal, released uint32
		err                    error
	}
	ch := make(chan got)
	go func() {
		tid, release, err := idleThread()
		if err != nil {
			release()
			ch <- got{err: err}
			return
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			release()
			ch <- got{err: err}
			return
		}
		done := make(chan struct{})
		go func() { normalThread(tid); close(done) }()
		<-done
		b, err := unix.SchedGetAttr(tid, 0)
		unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
		release()
		c, _ := unix.SchedGetAttr(tid, 0)
		ch <- got{a.Policy, b.Policy, c.Policy, err}
	}()
	g := <-ch
	if g.err != nil {
		t.Fatal(g.err)
	}
	if g.idle != unix.SCHED_IDLE || g.normal != unix.SCHED_NORMAL || g.released != unix.SCHED_NORMAL {
		t.Errorf("policies %d, %d after normalThread, %d after release; want SCHED_IDLE (%d), then SCHED_NORMAL (%d)", g.idle, g.normal, g.released, unix.SCHED_IDLE, unix.SCHED_NORMAL)
	}
}

// TestIdleThreadKeepsChildren: a child started, with the parent-death
// signal, from the thread the worker later runs on outlives the worker.
// The kernel sends that signal when the starting thread exits, and a
// goroutine that ends locked to its thread takes the thread with it: a
// worker that did so killed a profile store the tests had started.
func TestIdleThreadKeepsChildren(t *testing.T) {
	pid := make(chan int)
	var cmd *exec.Cmd
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd = exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		contain.DieWithParent(cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			pid <- 0
			return
		}
		// The worker's life, on this same thread.
		_, release, err := idleThread()
		if err == nil {
			release()
		}
		pid <- cmd.Process.Pid
	}()
	p := <-pid
	if p == 0 {
		t.Fatal("sleep did not start")
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// The goroutine has ended; a thread it took along is gone in far
	// less than this, and its child with it.
	time.Sleep(300 * time.Millisecond)
	if !contain.Running(p) {
		t.Fatal("the child started from the worker's thread was killed when the worker ended")
	}
}
