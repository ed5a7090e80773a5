package load

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Arrivals is open-loop load: requests are sent on a clock, Rate a
// second (constant gaps, or with Poisson exponential gaps of that mean),
// whatever the server answers. A request's latency counts from the time
// it was meant to be sent, as wrk2 measures it: when the server stalls,
// every request the clock scheduled during the stall waits, where a
// closed loop (each connection sending when its last request answered)
// stops sending and puts the stall on a few requests (coordinated
// omission). The zero Arrivals is the closed loop.
type Arrivals struct {
	Rate    float64 // requests per second; 0: closed loop
	Poisson bool
	Seed    uint64 // of the Poisson gaps; the same seed, the same schedule
}

// Open reports whether a is open-loop load.
func (a Arrivals) Open() bool { return a.Rate > 0 }

// String is a as the -rate flag gives it.
func (a Arrivals) String() string {
	if !a.Open() {
		return "closed loop"
	}
	kind := "constant"
	if a.Poisson {
		kind = "poisson"
	}
	return fmt.Sprintf("%g/s %s", a.Rate, kind)
}

// lateSlack is how far behind its time a send may start before it counts
// as late: the timers' own precision.
const lateSlack = time.Millisecond

// openGrace is how long after a phase's end the sends whose time came
// before it may still start: a stall just before the end delays them, as
// it delays the others; past it they are dropped.
const openGrace = time.Second

// schedule hands out the intended send times, in order, to the workers.
type schedule struct {
	mu   sync.Mutex
	next time.Time
	gap  func() time.Duration
}

func newSchedule(start time.Time, a Arrivals) *schedule {
	mean := float64(time.Second) / a.Rate
	s := &schedule{next: start}
	if a.Poisson {
		rng := rand.New(rand.NewPCG(a.Seed, 0x9e3779b97f4a7c15))
		s.gap = func() time.Duration { return time.Duration(rng.ExpFloat64() * mean) }
	} else {
		var acc float64 // whole nanoseconds, without drift
		s.gap = func() time.Duration {
			acc += mean
			d := time.Duration(math.Floor(acc))
			acc -= float64(d)
			return d
		}
	}
	return s
}

// take is the next intended send time.
func (s *schedule) take() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.next
	s.next = s.next.Add(s.gap())
	return at
}

// runOpen is run on a clock: each worker takes the next intended time,
// waits for it when early, and sends; the clock schedules nothing from
// the deadline on. A send whose time came before the deadline but that no
// worker could start within openGrace after it (every connection busy) is
// dropped; one started more than lateSlack after its time is late. Latency is from the intended time,
// RawLatency from the send.
func runOpen(ctx context.Context, conns int, deadline time.Time, a Arrivals, step func(i int, r *Result), end phaseEnd) (*Result, error) {
	res := &Result{Latency: newHistogram(), RawLatency: newHistogram(), Arrivals: a, Drain: end.drain}
	var g gather
	start := time.Now()
	sched := newSchedule(start, a)
	for i := 0; i < conns; i++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			raw := &Result{Latency: newHistogram()}
			local := &Result{Latency: newHistogram()}
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for ctx.Err() == nil {
				at := sched.take()
				if !at.Before(deadline) {
					break
				}
				local.Scheduled++
				from := at // the latency's start
				if wait := time.Until(at); wait > 0 {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						local.Dropped++
						continue
					case <-timer.C:
					}
					// The connection was free before the send's time: any
					// lag past it is the timer's wake-up, the driver's, not
					// the server's (a few hundred µs on a busy machine).
					from = time.Now()
					if from.Sub(at) > lateSlack {
						local.Late++
					}
				} else if !time.Now().Before(deadline.Add(openGrace)) {
					local.Dropped++ // its time came, no connection was free in time
					continue
				} else if -wait > lateSlack {
					local.Late++
				}
				ok := raw.OK
				step(i, raw)
				if raw.OK > ok {
					local.Latency.RecordValue(max(time.Since(from).Microseconds(), 1))
				}
			}
			g.add(func() {
				res.addCounts(raw)
				res.Scheduled += local.Scheduled
				res.Late += local.Late
				res.Dropped += local.Dropped
				res.Latency.Merge(local.Latency)
				res.RawLatency.Merge(raw.Latency)
			})
		}()
	}
	res.settle(g.wait(conns, end.hard, end.abort))
	res.Elapsed = time.Since(start)
	return res, ctx.Err()
}

// Held reports whether an open-loop phase held its rate: no more than 1%
// of its scheduled sends dropped. The reason says what fell short.
func (r *Result) Held() (bool, string) {
	if !r.Arrivals.Open() || r.Scheduled == 0 || float64(r.Dropped) <= 0.01*float64(r.Scheduled) {
		return true, ""
	}
	return false, fmt.Sprintf("the driver could not hold %s: %d of %d scheduled sends dropped (every connection busy when their time came; %d sent late); give more connections (-conns) or a lower -rate",
		r.Arrivals, r.Dropped, r.Scheduled, r.Late)
}
