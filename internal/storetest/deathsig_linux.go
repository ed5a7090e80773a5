package storetest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the server killed when the test binary that started
// it dies (a test killed on its timeout runs no cleanup).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
