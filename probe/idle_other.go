//go:build !linux

package probe

import "runtime"

// idleThread locks the calling goroutine to its thread; only Linux has a
// policy for threads that run when a CPU is idle.
func idleThread() (int, error) {
	runtime.LockOSThread()
	return 0, nil
}

// normalThread: no thread is idle here.
func normalThread(int) {}
