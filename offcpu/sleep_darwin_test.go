package offcpu

import (
	"syscall"
	"time"
)

// sleepInSyscall sleeps d in select(2) with no descriptors (no nanosleep
// in package syscall here), until d has passed.
//
//go:noinline
func sleepInSyscall(d time.Duration) {
	end := time.Now().Add(d)
	for left := d; left > 0; left = time.Until(end) {
		tv := syscall.NsecToTimeval(int64(left))
		_ = syscall.Select(0, nil, nil, nil, &tv)
	}
}
