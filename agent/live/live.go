// Package live is the agent's live mode. A binary that probe build made
// runs it when its environment names a store (PERFSPY_PUSH) and probe is
// not measuring it: one request in N of each route is accounted
// (PERFSPY_SAMPLE, default 64; each route's first request of a period
// included), the allocation and copy recorders count those requests' work
// exactly, by site, and every period (PERFSPY_PERIOD, default 15s) the agent
// pushes to the store, per route, the accounted requests' allocations and
// copies (the profiles probe run pushes, with the route label and the
// requests sample type holding the accounted requests) and every request
// the route served (perfspy_requests), and the accounted requests' own
// bills: the slowest 1%'s and the median group's allocations and copies
// (perfspy_tail_allocs, perfspy_median_allocs, perfspy_tail_copies,
// perfspy_median_copies). See docs/live.md.
//
// Under faults it keeps to its bounds: a store that is down or slow loses
// periods (counted, said in the next push and once on standard error),
// never blocks a request and never queues more than QueueLen periods; a
// panic in the agent's goroutines is recovered and reported; SIGTERM
// pushes the last period within livepush.StopDeadline.
//
// It uses the standard library only.
package live

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/perfspy/perfspy/agent/internal/spytable"
	"github.com/perfspy/perfspy/agent/livepush"
	"github.com/perfspy/perfspy/agent/wire"
)

// Build is what probe build knows of the binary: the commit of the source
// it built (build info may have none: -buildvcs=false).
type Build struct {
	Commit string
}

var started atomic.Bool

// Start starts live mode when the environment asks for it (wire.PushEnv
// set; probe run builds its targets without live mode, so a probe session
// never meets it, except probe run -instructions -live, which counts what
// it costs). probe build's file in
// package main calls it from its init, after every package's init: the
// recorders have registered. A configuration error is said on standard
// error, and the program runs unmeasured.
func Start(b Build) {
	if os.Getenv(wire.PushEnv) == "" || !started.CompareAndSwap(false, true) {
		return
	}
	log := &livepush.Logger{W: os.Stderr}
	cfg, err := livepush.FromEnv(os.Getenv, b.Commit)
	if err != nil {
		log.Printf("perfspy live: %v; live mode is off", err)
		return
	}
	l, err := newLive(cfg, spytable.Lives(), log)
	if err != nil {
		log.Printf("perfspy live: %v; live mode is off", err)
		return
	}
	go l.loop()
	if cfg.LastPush {
		go l.onSIGTERM()
	}
}

// agentLive is live mode running.
type agentLive struct {
	cfg  *livepush.Config
	log  *livepush.Logger
	push *livepush.Pusher
	stop chan struct{}

	mu  sync.Mutex // the collector
	col collector
}

// newLive switches the recorders to their sampled mode and takes the
// first baseline: what happened before it is not pushed.
func newLive(cfg *livepush.Config, lives []*spytable.Live, log *livepush.Logger) (*agentLive, error) {
	if len(lives) == 0 {
		return nil, fmt.Errorf("this binary has no recorders (build it with probe build)")
	}
	p, err := livepush.NewPusher(cfg, log)
	if err != nil {
		return nil, err
	}
	l := &agentLive{cfg: cfg, log: log, push: p, stop: make(chan struct{}), col: collector{lives: lives, sample: cfg.Sample, last: time.Now(), bills: spytable.Bills()}}
	l.col.routes.Next()
	for _, lv := range lives {
		if err := lv.Table.Begin(); err != nil {
			return nil, err
		}
		lv.Sampled()
	}
	if l.col.bills != nil {
		l.col.bills.Start()
	}
	go p.Run(context.Background())
	return l, nil
}

// loop closes a period every cfg.Period until stop, on the clock's
// cadence (a late wake skips the periods it slept through).
func (l *agentLive) loop() {
	next := time.Now().Add(l.cfg.Period)
	for {
		waitUntil(next)
		select {
		case <-l.stop:
			return
		default:
		}
		now := time.Now()
		l.tick(now)
		for !next.After(now) {
			next = next.Add(l.cfg.Period)
		}
	}
}

// waitUntil returns at t or soon after: sleepFor may end early.
func waitUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		sleepFor(d)
	}
}

// tick closes the period that ends now and queues it.
func (l *agentLive) tick(now time.Time) {
	defer l.log.Recover("collect")
	l.mu.Lock()
	pd, err := l.col.next(now)
	l.mu.Unlock()
	if err != nil {
		l.log.Once("collect", "perfspy live: %v", err)
		return
	}
	l.push.Enqueue(pd)
}

// flush closes the last period and waits, until the deadline, for every
// period queued to be pushed.
func (l *agentLive) flush(deadline time.Duration) bool {
	close(l.stop)
	l.tick(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	return l.push.Drain(ctx)
}

// signalWatched tells whether a channel of the program's own is notified
// of sig (os/signal, as probe build's overlay adds it).
//
//go:linkname signalWatched os/signal.perfspyWatched
func signalWatched(sig os.Signal) bool

// onSIGTERM pushes the last period when the process is told to stop,
// then lets SIGTERM do what it would have done: the program's own handler
// has it already; without one, the signal is raised again and ends the
// process.
func (l *agentLive) onSIGTERM() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch
	if !l.flush(livepush.StopDeadline) {
		l.log.Printf("perfspy live: the last period was not pushed within %s", livepush.StopDeadline)
	}
	signal.Stop(ch)
	if !signalWatched(syscall.SIGTERM) {
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
