//go:build !linux

package proc

import "errors"

// CanPin says whether this platform pins threads to CPUs (-cpus): only
// Linux has sched_setaffinity.
const CanPin = false

// errNoPinning is what pinning says where the platform cannot.
var errNoPinning = errors.New("CPU pinning is not available on this platform")

func pinThread([]int) (func(), error) { return nil, errNoPinning }

// PinSelf fails: no pinning on this platform.
func PinSelf([]int) (func(), error) { return nil, errNoPinning }
