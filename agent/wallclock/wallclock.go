// Package wallclock adds a wall-clock profile to the probe agent: it
// samples the stack of every goroutine, running or not, at Hz, the user's
// view of where a request's time goes. probe's overlay imports it from the
// target's package main when the off-CPU window asks for it.
//
// It uses the standard library only (runtime.GoroutineProfile), so that it
// adds nothing to a target's build list. Its cost grows with the number of
// goroutines (each sample stops the world and walks them all), which is
// why the execution trace, not this profile, gives the off-CPU figures.
package wallclock

import (
	"errors"
	"runtime"
	"sort"
	"time"

	"github.com/perfspy/perfspy/agent"
	"github.com/perfspy/perfspy/agent/wire"
)

// Hz is the sampling rate: 99, not 100, so that it does not beat with
// timers that fire every 10 ms.
const Hz = 99

func init() {
	agent.RegisterCounter("wallclock", &sampler{})
}

type sampler struct {
	stop, done chan struct{}
	start      time.Time
	counts     map[[32]uintptr]uint64
}

// Begin starts sampling.
func (s *sampler) Begin() error {
	if s.stop != nil {
		return errors.New("wall-clock profile already running")
	}
	s.counts = map[[32]uintptr]uint64{}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	s.start = time.Now()
	go s.run()
	return nil
}

func (s *sampler) run() {
	defer close(s.done)
	t := time.NewTicker(time.Second / Hz)
	defer t.Stop()
	var recs []runtime.StackRecord
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			recs = s.sample(recs)
		}
	}
}

// sample adds one stack per goroutine; it returns the records buffer for
// the next sample.
func (s *sampler) sample(recs []runtime.StackRecord) []runtime.StackRecord {
	n, ok := runtime.GoroutineProfile(recs)
	for !ok {
		recs = make([]runtime.StackRecord, n+n/4+16)
		n, ok = runtime.GoroutineProfile(recs)
	}
	for i := range recs[:n] {
		s.counts[recs[i].Stack0]++
	}
	return recs
}

// End stops sampling and writes the window's wire.WallclockReport to path.
func (s *sampler) End(path string) error {
	if s.stop == nil {
		return errors.New("wall-clock profile not running")
	}
	close(s.stop)
	<-s.done
	s.stop = nil
	rep := wire.WallclockReport{Hz: Hz, Seconds: time.Since(s.start).Seconds()}
	frames := map[uintptr]wire.PCFrames{}
	for stk, n := range s.counts {
		rec := runtime.StackRecord{Stack0: stk}
		pcs := rec.Stack()
		st := make([]wire.PCFrames, len(pcs))
		for i, pc := range pcs {
			pf, ok := frames[pc]
			if !ok {
				pf = agent.Symbolize([]uintptr{pc})[0]
				frames[pc] = pf
			}
			st[i] = pf
		}
		rep.Samples = append(rep.Samples, wire.WallclockSample{Stack: st, Count: n})
	}
	s.counts = nil
	// Deterministic output: by count, then by the stack's PCs.
	sort.Slice(rep.Samples, func(i, j int) bool {
		a, b := rep.Samples[i], rep.Samples[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		for k := 0; k < len(a.Stack) && k < len(b.Stack); k++ {
			if a.Stack[k].PC != b.Stack[k].PC {
				return a.Stack[k].PC < b.Stack[k].PC
			}
		}
		return len(a.Stack) < len(b.Stack)
	})
	return wire.WriteJSON(path, &rep)
}
