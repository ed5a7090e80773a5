//go:build !linux && !darwin

package live

import "time"

// sleepFor waits d on a runtime timer where select(2) is not at hand.
func sleepFor(d time.Duration) { time.Sleep(d) }
