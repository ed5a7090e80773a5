package offcpu

import (
	"bytes"
	"context"
	"math"
	"runtime/trace"
	"sync"
	"testing"
	"time"
)

//go:noinline
func wakeUp(ch chan struct{}) { close(ch) }

// waitIdle is the wait of the goroutine outside any request.
//
//go:noinline
func waitIdle(ch chan struct{}) { waitOnChannel(ch) }

//go:noinline
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// traceRequests traces two requests, each in a region of RegionType on
// its own goroutine: one waits 20 ms on a channel that main.wakeUp closes,
// then spins 2 ms, and logs its route (GET /chan) as net/http's overlay
// does; one sleeps 10 ms in nanosleep(2), no route. A goroutine outside
// any request waits 30 ms on a channel. It returns the trace and the
// channel wait as the request's goroutine measured it: a loaded machine
// starts that goroutine late, and the wait is shorter than 20 ms.
func traceRequests(t *testing.T) ([]byte, time.Duration) {
	t.Helper()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("skipped: cannot trace: %v", err)
	}
	var wg sync.WaitGroup
	var waited time.Duration
	ch, idle := make(chan struct{}), make(chan struct{})
	wg.Add(3)
	go func() {
		defer wg.Done()
		r := trace.StartRegion(context.Background(), RegionType)
		t0 := time.Now()
		waitOnChannel(ch)
		waited = time.Since(t0)
		spin(2 * time.Millisecond)
		trace.Log(context.Background(), RouteCategory, "GET /chan")
		r.End()
	}()
	go func() {
		defer wg.Done()
		r := trace.StartRegion(context.Background(), RegionType)
		sleepInSyscall(10 * time.Millisecond)
		r.End()
	}()
	// The idle goroutine says when it starts: on a loaded machine it starts
	// late, and its wait would be shorter than the 30 ms slept below.
	started := make(chan struct{})
	go func() { defer wg.Done(); close(started); waitIdle(idle) }()
	<-started
	time.Sleep(20 * time.Millisecond)
	wakeUp(ch)
	time.Sleep(10 * time.Millisecond)
	close(idle)
	wg.Wait()
	trace.Stop()
	return buf.Bytes(), waited
}

func TestRequests(t *testing.T) {
	data, waited := traceRequests(t)
	res, err := Parse(bytes.NewReader(data), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != 2 {
		t.Fatalf("%d requests, want 2", len(res.Requests))
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	var chanSync int64 // the channel request's sync time, its p99 group's
	for _, r := range res.Requests {
		var sum int64
		for _, v := range r.Parts {
			sum += v
		}
		t.Logf("request: total %.3f ms, parts %v", ms(r.Total), r.Parts)
		// The parts close on the request's duration.
		if d := r.Total - sum; math.Abs(float64(d)) > 0.01*float64(r.Total) {
			t.Errorf("parts sum to %.3f ms of %.3f ms", ms(sum), ms(r.Total))
		}
		sync, sys, cpu := r.Parts[part["sync"]], r.Parts[part["syscall"]], r.Parts[part["cpu"]]
		// Told apart by their larger wait: the nanosleep request may wait
		// a few µs on sync too (the tracer's own buffer, under -race).
		switch {
		case sync > sys:
			chanSync = sync
			if r.Route != "GET /chan" {
				t.Errorf("channel request's route %q, want GET /chan", r.Route)
			}
			// The wait measured in the goroutine also holds its wait for
			// a P once woken (sched).
			w, sched := ms(waited.Nanoseconds()), ms(r.Parts[part["sched"]])
			if ms(sync) > w+1 || ms(sync)+sched < w-1 || ms(cpu) < 1.8 || sys != 0 {
				t.Errorf("channel request: sync %.3f ms (measured %.3f, sched %.3f), cpu %.3f ms, syscall %.3f ms", ms(sync), w, sched, ms(cpu), ms(sys))
			}
			var woken string
			for _, w := range r.Waits {
				if s := res.Samples[w.Sample]; s.Reason == "sync" {
					woken = s.WokenBy
				}
			}
			if woken != "github.com/perfspy/perfspy/offcpu.wakeUp" {
				t.Errorf("channel wait woken by %q, want offcpu.wakeUp", woken)
			}
		case ms(sys) < 9 || r.Route != "":
			t.Errorf("nanosleep request: syscall %.3f ms, route %q", ms(sys), r.Route)
		}
	}
	// The idle goroutine's wait is the background's, never a request's.
	if ms(res.Background["sync"]) < 28 {
		t.Errorf("background sync %.3f ms, want the idle goroutine's 30", ms(res.Background["sync"]))
	}
	// Told apart by its stack, not its length: a loaded machine (the race
	// detector's run) stretches the request's 20 ms wait past 30.
	idle := 0
	for _, s := range res.Samples {
		for _, f := range s.Stack {
			if f.Func == "github.com/perfspy/perfspy/offcpu.waitIdle" {
				idle++
				if s.Scope == ScopeRequest {
					t.Errorf("a request holds the idle goroutine's wait: %+v", s)
				}
			}
		}
	}
	if idle == 0 {
		t.Error("the idle goroutine's wait is missing")
	}
	p50, p99 := Tail(res, 3)
	if p99.Requests != 1 || p99.Parts["sync"] != float64(chanSync) || len(p99.Top) == 0 || p99.Top[0].Func != "github.com/perfspy/perfspy/offcpu.waitOnChannel" {
		t.Errorf("p99 group %+v", p99)
	}
	if p50.Requests != 1 {
		t.Errorf("p50 group of %d requests", p50.Requests)
	}
	if err := res.Profile("").CheckValid(); err != nil {
		t.Fatal(err)
	}
}
