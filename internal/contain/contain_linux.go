package contain

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// openCgroupDir opens a cgroup's folder for clone into it.
func openCgroupDir(dir string) (int, error) {
	return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// becomeSubreaper has the target's orphans reparented to probe.
func becomeSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// prepareOS has the command killed when probe's thread dies, and started
// inside the cgroup whose folder cgroupFD holds (when not -1).
func prepareOS(attr *syscall.SysProcAttr, cgroupFD int) {
	DieWithParent(attr)
	if cgroupFD >= 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, cgroupFD
	}
}

// Running tells a running process from one that is gone or a zombie.
func Running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// DieWithParent has the command killed when the thread that started it
// dies (Linux's parent-death signal; nothing elsewhere).
func DieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// NoCgroupFD takes the cgroup out of a command's start.
func NoCgroupFD(attr *syscall.SysProcAttr) { attr.UseCgroupFD = false }
