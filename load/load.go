// Package load drives a target with bounded load and counts what succeeded.
//
// A Driver runs in phases: probe calls Run once for warm-up and once for each
// window, and the driver's connections stay open between phases, so that
// connection setup is not counted in a window. A phase starts no request after
// its deadline and waits for those in flight, so every request it counts
// started and ended inside the phase.
//
// A Spec is a run's load settings; it makes its driver (Spec.New) for the
// protocol the started target answers (Spec.Resolve: never by its name),
// and Spec.Check refuses, before any build, every combination no driver
// takes.
package load

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Driver sends requests to a target.
type Driver interface {
	// Run sends requests for d, or until ctx is done, and returns the counts.
	Run(ctx context.Context, d time.Duration) (*Result, error)
	// RunN sends n requests (or stops when ctx is done): the load for a
	// target running many times slower than usual, under valgrind.
	RunN(ctx context.Context, n int) (*Result, error)
	// Close releases the driver's connections.
	Close() error
}

// Result counts one phase.
type Result struct {
	OK       int64         // successes: 2xx for HTTP
	Non2xx   int64         // responses with another status
	Errors   int64         // transport errors
	Dials    int64         // connections opened during the phase
	Elapsed  time.Duration // from the first request to the last response
	Latency  *hdrhistogram.Histogram
	FirstErr string // the first error seen, for the report
	// Datagrams the driver sent and received during the phase, and their
	// bytes: the bulk drivers (QUIC, UDP) count them; the others leave 0.
	Datagrams, DatagramBytes int64
	MaxDatagram              int64  // the largest datagram's bytes since the driver started
	DatagramSource           string // how the driver counts them
	// Open-loop load (Arrivals): Latency is then from each request's
	// intended send time, RawLatency from its actual send; Scheduled
	// sends the clock gave the phase, Late those started more than a
	// millisecond behind it, Dropped those no connection could start
	// before the phase ended.
	Arrivals                 Arrivals
	RawLatency               *hdrhistogram.Histogram
	Scheduled, Late, Dropped int64
	// Abandoned are the requests still in flight when the phase's drain
	// allowance after its deadline ran out (drain.go): not counted as
	// errors, and a phase that has any is not one to judge.
	Abandoned int64
	// Drain is that allowance.
	Drain time.Duration
}

// Latency is recorded in microseconds, from 1 µs to 60 s, at 3 significant figures.
func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, 60_000_000, 3)
}

// Percentile returns the latency at q (0 to 100) in microseconds.
func (r *Result) Percentile(q float64) int64 {
	if r.Latency == nil || r.Latency.TotalCount() == 0 {
		return 0
	}
	return r.Latency.ValueAtQuantile(q)
}

// RPS is successes per second of the phase.
func (r *Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// Paced sends n requests one at a time through d, each after a pause of
// gap and, when idle is not nil, once idle reports true (polled every
// 100 µs, for up to a second), so that each finds the target idle: the
// load of an instructions window, where whether a request waits for the
// server changes the path it takes. Elapsed includes the pauses.
func Paced(ctx context.Context, d Driver, n int, gap time.Duration, idle func() bool) (*Result, error) {
	if n <= 0 {
		return nil, fmt.Errorf("load: request count %d must be positive", n)
	}
	total := &Result{Latency: newHistogram()}
	start := time.Now()
	t := time.NewTimer(gap)
	defer t.Stop()
	for i := 0; i < n; i++ {
		t.Reset(gap)
		select {
		case <-ctx.Done():
			total.Elapsed = time.Since(start)
			return total, ctx.Err()
		case <-t.C:
		}
		if idle != nil {
			for deadline := time.Now().Add(time.Second); !idle() && time.Now().Before(deadline); {
				time.Sleep(100 * time.Microsecond)
			}
		}
		r, err := d.RunN(ctx, 1)
		if r != nil {
			total.OK += r.OK
			total.Non2xx += r.Non2xx
			total.Errors += r.Errors
			total.Dials += r.Dials
			total.Datagrams += r.Datagrams
			total.DatagramBytes += r.DatagramBytes
			total.MaxDatagram = max(total.MaxDatagram, r.MaxDatagram)
			total.DatagramSource = r.DatagramSource
			if total.FirstErr == "" {
				total.FirstErr = r.FirstErr
			}
			total.Latency.Merge(r.Latency)
		}
		if err != nil {
			total.Elapsed = time.Since(start)
			return total, err
		}
	}
	total.Elapsed = time.Since(start)
	return total, nil
}

// addCounts adds o's requests to r: successes, failures, the first error.
func (r *Result) addCounts(o *Result) {
	r.OK += o.OK
	r.Non2xx += o.Non2xx
	r.Errors += o.Errors
	if r.FirstErr == "" {
		r.FirstErr = o.FirstErr
	}
}

// statusError is a complete response whose status is not a success: it
// counts in Result.Non2xx, not in Errors.
type statusError int

func (e statusError) Error() string { return "status " + strconv.Itoa(int(e)) }

func (statusError) answered() {}

// answeredError is a request the server answered with a failure status
// (HTTP non-2xx, a gRPC status other than OK): it counts in Non2xx.
type answeredError interface {
	error
	answered()
}

// workers are the Run and RunN of a driver whose n workers each keep a
// connection and make one exchange per step; dials counts the
// connections opened, for Result.Dials; arrivals, when open, sends on a
// clock.
type workers struct {
	n        int
	dials    atomic.Int64
	step     func(ctx context.Context) func(i int, r *Result)
	arrivals Arrivals
	// abort closes the workers' connections, so that requests abandoned
	// at a phase's end come back (drain.go); nil leaves them.
	abort func()
}

// Run implements Driver.
func (w *workers) Run(ctx context.Context, dur time.Duration) (*Result, error) {
	return countDials(&w.dials, func() (*Result, error) { return phaseAt(ctx, dur, w.n, w.arrivals, w.step(ctx), w.abort) })
}

// RunN implements Driver.
func (w *workers) RunN(ctx context.Context, n int) (*Result, error) {
	return countDials(&w.dials, func() (*Result, error) { return phaseN(ctx, n, w.n, w.step(ctx)) })
}

// countDials runs a phase and sets its Dials: the connections opened
// while it ran, from a driver's counter.
func countDials(dials *atomic.Int64, phase func() (*Result, error)) (*Result, error) {
	dials0 := dials.Load()
	r, err := phase()
	if r != nil {
		r.Dials = dials.Load() - dials0
	}
	return r, err
}

// countedStep makes a phase's step of one request by worker i: timed and
// counted on success, counted as an error otherwise (not when the phase
// was cancelled mid-request).
func countedStep(ctx context.Context, transfer func(ctx context.Context, i int) error) func(i int, r *Result) {
	return func(i int, r *Result) {
		t0 := time.Now()
		err := transfer(ctx, i)
		if err == nil {
			r.OK++
			r.Latency.RecordValue(max(time.Since(t0).Microseconds(), 1))
			return
		}
		if ctx.Err() != nil {
			return
		}
		var ae answeredError
		if errors.As(err, &ae) {
			// An answer, not a failure of the transport: no pause.
			r.Non2xx++
			if r.FirstErr == "" {
				r.FirstErr = err.Error()
			}
			return
		}
		r.Errors++
		if r.FirstErr == "" {
			r.FirstErr = err.Error()
		}
		time.Sleep(time.Millisecond)
	}
}

// phase runs conns workers until the deadline d from now (or ctx ends);
// worker i calls step(i, r) for each request, counting into its own r,
// and the counts are merged at the end. No request starts after the
// deadline; those in flight finish.
func phase(ctx context.Context, d time.Duration, conns int, step func(i int, r *Result)) (*Result, error) {
	return phaseAt(ctx, d, conns, Arrivals{}, step)
}

// phaseAt is phase, on a clock when a is open-loop load; abort, when not
// nil, closes the driver's connections (drain.go).
func phaseAt(ctx context.Context, d time.Duration, conns int, a Arrivals, step func(i int, r *Result), abort ...func()) (*Result, error) {
	if d <= 0 {
		return nil, fmt.Errorf("load: duration %v must be positive", d)
	}
	deadline := time.Now().Add(d)
	end := phaseEnd{hard: deadline.Add(drainAllowance(d)), drain: drainAllowance(d)}
	if len(abort) > 0 {
		end.abort = abort[0]
	}
	if a.Open() {
		end.hard = end.hard.Add(openGrace)
		return runOpen(ctx, conns, deadline, a, step, end)
	}
	return run(ctx, conns, func() bool { return time.Now().Before(deadline) }, step, end)
}

// phaseEnd is when a phase's requests in flight are abandoned (none: a
// phase bounded by a count waits for them), and how.
type phaseEnd struct {
	hard  time.Time
	drain time.Duration
	abort func()
}

// phaseN is phase bounded by a count of requests: exactly n are started.
func phaseN(ctx context.Context, n, conns int, step func(i int, r *Result)) (*Result, error) {
	if n <= 0 {
		return nil, fmt.Errorf("load: request count %d must be positive", n)
	}
	var left atomic.Int64
	left.Store(int64(n))
	return run(ctx, conns, func() bool { return left.Add(-1) >= 0 }, step, phaseEnd{})
}

func run(ctx context.Context, conns int, more func() bool, step func(i int, r *Result), end phaseEnd) (*Result, error) {
	res := &Result{Latency: newHistogram(), Drain: end.drain}
	var g gather
	start := time.Now()
	for i := 0; i < conns; i++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			local := &Result{Latency: newHistogram()}
			for ctx.Err() == nil && more() {
				step(i, local)
			}
			g.add(func() {
				res.addCounts(local)
				res.Latency.Merge(local.Latency)
			})
		}()
	}
	res.settle(g.wait(conns, end.hard, end.abort))
	res.Elapsed = time.Since(start)
	return res, ctx.Err()
}
