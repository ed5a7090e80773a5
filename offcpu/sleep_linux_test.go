package offcpu

import (
	"syscall"
	"time"
)

// sleepInSyscall sleeps d in nanosleep(2), resuming with the remainder when
// a signal (the GC's preemption, SIGURG) cuts the call short with EINTR.
//
//go:noinline
func sleepInSyscall(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
			return
		}
		ts = rem
	}
}
