package probe

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// idleThread locks the calling goroutine to its thread and makes the
// thread run only when a CPU would otherwise be idle (SCHED_IDLE): the
// figure stream's worker then takes no time a measured process wants,
// even the moments its threads wake for a GC. The goroutine must end
// locked: its thread then exits with it, its policy never reaching
// another goroutine.
// It returns the thread's id, for normalThread.
func idleThread() (int, error) {
	runtime.LockOSThread()
	return unix.Gettid(), unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
}

// normalThread gives thread tid (idleThread's) the normal policy back.
func normalThread(tid int) {
	unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
}
