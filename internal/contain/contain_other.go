//go:build unix && !linux

package contain

import (
	"errors"
	"syscall"
)

// openCgroupDir fails: cgroups are Linux's. The group is a process group,
// and the watchdog kills it if probe dies.
func openCgroupDir(string) (int, error) { return -1, errors.New("no cgroups on this platform") }

// becomeSubreaper does nothing: no child subreaper outside Linux, so an
// orphan that left the process group is not found (docs/security.md).
func becomeSubreaper() {}

// prepareOS does nothing: no parent-death signal outside Linux; the
// watchdog covers probe's death.
func prepareOS(*syscall.SysProcAttr, int) {}

// Running tells whether pid exists (a zombie included: there is no
// /proc to tell).
func Running(pid int) bool { return syscall.Kill(pid, 0) == nil }

// DieWithParent does nothing: the parent-death signal is Linux's.
func DieWithParent(*syscall.SysProcAttr) {}

// NoCgroupFD does nothing: no cgroups here.
func NoCgroupFD(*syscall.SysProcAttr) {}
