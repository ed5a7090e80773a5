package live

import (
	"syscall"
	"time"
)

// sleepFor waits d in a select(2) with no descriptors, on a thread of its
// own: unlike a runtime timer, which every look of the scheduler at its
// timers checks against the clock (a few hundred instructions a request
// on a light handler), a thread blocked in the kernel costs the server
// nothing between periods. A signal ends it early; waitUntil sleeps again.
func sleepFor(d time.Duration) {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	syscall.Select(0, nil, nil, nil, &tv) //nolint:errcheck // EINTR: waitUntil looks at the clock
}
