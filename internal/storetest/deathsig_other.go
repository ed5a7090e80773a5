//go:build !linux

package storetest

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal.
func dieWithParent(*exec.Cmd) {}
