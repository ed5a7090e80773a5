package proc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// CanPin says whether this platform pins threads to CPUs (-cpus).
const CanPin = true

func cpuSet(cpus []int) *unix.CPUSet {
	var s unix.CPUSet
	for _, c := range cpus {
		s.Set(c)
	}
	return &s
}

// pinThread pins the calling thread, which the caller has locked, to
// cpus: a child forked from it inherits the mask. restore puts the old
// mask back.
func pinThread(cpus []int) (restore func(), err error) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("reading cpu affinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, cpuSet(cpus)); err != nil {
		return nil, err
	}
	return func() { _ = unix.SchedSetaffinity(0, &old) }, nil
}

// PinSelf pins every thread of this process to cpus (threads started
// later inherit the mask of the thread that starts them) and returns
// what puts the mask it found back: a value of the caller's, so that
// nothing outlives the session that pinned.
func PinSelf(cpus []int) (unpin func(), err error) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, err
	}
	if err := setAllThreads(cpuSet(cpus)); err != nil {
		_ = setAllThreads(&old)
		return nil, err
	}
	return func() { _ = setAllThreads(&old) }, nil
}

func setAllThreads(set *unix.CPUSet) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range ents {
		var tid int
		if _, err := fmt.Sscan(e.Name(), &tid); err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

var errNoPinning = errors.New("CPU pinning is not available on this platform")
