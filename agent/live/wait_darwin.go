package live

import (
	"syscall"
	"time"
)

// sleepFor waits d in a select(2) with no descriptors (see wait_linux.go).
func sleepFor(d time.Duration) {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	syscall.Select(0, nil, nil, nil, &tv) //nolint:errcheck // EINTR: waitUntil looks at the clock
}
