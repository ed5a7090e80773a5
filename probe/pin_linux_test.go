package probe

import "golang.org/x/sys/unix"

// pinPid pins process pid to CPU c.
func pinPid(pid, c int) error {
	var set unix.CPUSet
	set.Set(c)
	return unix.SchedSetaffinity(pid, &set)
}
