package load

import (
	"sync"
	"sync/atomic"
	"time"
)

// A phase starts no request after its deadline and waits for those in
// flight, but not for ever: a server that never answers one request in
// 500 kept a window open past its deadline by the driver's 30 s request
// timeout, window after window. Past the deadline and its drain
// allowance, the requests still in flight are abandoned: counted
// (Result.Abandoned, not among the errors), the driver's abort closes
// their connections, and a worker not back within abortWait after that
// is left behind with its counts. A phase with abandoned requests is not
// one to judge: probe says so.

// drainAllowance is how long after its deadline a phase of length d waits
// for the requests in flight: a quarter of the phase, at least 2 s and at
// most 10 s.
func drainAllowance(d time.Duration) time.Duration {
	return min(max(d/4, 2*time.Second), 10*time.Second)
}

// abortWait is how long the workers have to come back once their
// connections are closed.
const abortWait = time.Second

// gather is where a phase's workers add their counts as they end.
type gather struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	exited atomic.Int64
	closed bool // the phase returned: a worker left behind adds nothing
}

// add runs merge with the phase's lock held, unless the phase returned.
func (g *gather) add(merge func()) {
	g.exited.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		merge()
	}
}

// wait waits for the phase's conns workers until hard (none: for ever),
// then aborts those still in a request; it returns how many were, and how
// many of those came back (their aborted request counted as an error,
// which the caller takes back).
func (g *gather) wait(conns int, hard time.Time, abort func()) (abandoned, back int64) {
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	if hard.IsZero() {
		<-done
		return 0, 0
	}
	t := time.NewTimer(time.Until(hard))
	defer t.Stop()
	select {
	case <-done:
		return 0, 0
	case <-t.C:
	}
	abandoned = int64(conns) - g.exited.Load()
	if abort != nil {
		abort()
	}
	t.Reset(abortWait)
	select {
	case <-done:
	case <-t.C:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	left := int64(conns) - g.exited.Load()
	return abandoned, abandoned - left
}

// settle takes the abandoned requests into r: counted apart, and their
// aborted requests out of the errors.
func (r *Result) settle(abandoned, back int64) {
	if abandoned == 0 {
		return
	}
	r.Abandoned = abandoned
	r.Errors = max(r.Errors-back, 0)
}
