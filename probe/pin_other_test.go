//go:build !linux

package probe

import "errors"

// pinPid fails: no pinning on this platform.
func pinPid(pid, c int) error { return errors.New("no CPU pinning on this platform") }
