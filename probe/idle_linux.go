package probe

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// idleThread locks the calling goroutine to its thread and makes the
// thread run only when a CPU would otherwise be idle (SCHED_IDLE): the
// figure stream's worker then takes no time a measured process wants,
// even the moments its threads wake for a GC.
// It returns the thread's id, for normalThread, and release, which the
// goroutine calls before it ends: the thread goes back to the normal
// policy and is unlocked. The thread must never exit with the goroutine:
// every child this process started from it has the parent-death signal
// (contain.DieWithParent), which the kernel sends when that thread, not
// the process, dies.
func idleThread() (tid int, release func(), err error) {
	runtime.LockOSThread()
	tid = unix.Gettid()
	release = func() {
		normalThread(tid)
		runtime.UnlockOSThread()
	}
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
		release()
		return 0, func() {}, err
	}
	return tid, release, nil
}

// normalThread gives thread tid (idleThread's) the normal policy back.
func normalThread(tid int) {
	unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
}
