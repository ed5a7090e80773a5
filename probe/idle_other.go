//go:build !linux

package probe

// idleThread: only Linux has a policy for threads that run when a CPU is
// idle; the worker runs as any goroutine.
func idleThread() (int, func(), error) {
	return 0, func() {}, nil
}

// normalThread: no thread is idle here.
func normalThread(int) {}
