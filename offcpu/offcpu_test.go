package offcpu

import (
	"bytes"
	"context"
	"os"
	"runtime/trace"
	"sync"
	"testing"
	"time"
)

//go:noinline
func waitOnChannel(ch chan struct{}) { <-ch }

var counter int

//go:noinline
func lockContended(mu *sync.Mutex) {
	mu.Lock()
	counter++
	mu.Unlock()
}

// traceScenario traces goroutines that wait for known reasons for known
// times: the trace written by this very runtime is the input.
func traceScenario(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("skipped: cannot trace: %v", err)
	}
	var wg sync.WaitGroup
	ch := make(chan struct{})
	wg.Add(3)
	// The waiters say when they start: on a loaded machine a goroutine
	// starts late, and its wait would be shorter than the sleep below.
	var started sync.WaitGroup
	started.Add(2)
	go func() { defer wg.Done(); started.Done(); waitOnChannel(ch) }()
	go func() { defer wg.Done(); sleepInSyscall(20 * time.Millisecond) }()
	var mu sync.Mutex
	mu.Lock()
	go func() { defer wg.Done(); started.Done(); lockContended(&mu) }()
	started.Wait()
	time.Sleep(30 * time.Millisecond)
	close(ch)
	mu.Unlock()
	wg.Wait()
	trace.Stop()
	return buf.Bytes()
}

func TestParseKnownWaits(t *testing.T) {
	data := traceScenario(t)
	res, err := Parse(bytes.NewReader(data), Options{})
	if err != nil {
		t.Fatal(err)
	}
	byFunc := map[string]map[string]int64{}
	for _, s := range res.Samples {
		for _, f := range s.Stack {
			if f.Func == "github.com/perfspy/perfspy/offcpu.waitOnChannel" || f.Func == "github.com/perfspy/perfspy/offcpu.sleepInSyscall" || f.Func == "github.com/perfspy/perfspy/offcpu.lockContended" {
				if byFunc[f.Func] == nil {
					byFunc[f.Func] = map[string]int64{}
				}
				byFunc[f.Func][s.Reason] += s.Nanos
				break
			}
		}
	}
	t.Logf("by function: %v; totals %v", byFunc, res.Nanos)
	for fn, w := range map[string]struct {
		reason string
		min    time.Duration
	}{
		"github.com/perfspy/perfspy/offcpu.waitOnChannel":  {"sync", 25 * time.Millisecond},
		"github.com/perfspy/perfspy/offcpu.sleepInSyscall": {"syscall", 18 * time.Millisecond},
		"github.com/perfspy/perfspy/offcpu.lockContended":  {"sync", 25 * time.Millisecond},
	} {
		if got := time.Duration(byFunc[fn][w.reason]); got < w.min {
			t.Errorf("%s: %s %v, want at least %v", fn, w.reason, got, w.min)
		}
	}
	p := res.Profile("")
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if *update {
		os.WriteFile("testdata/scenario.trace", data, 0o644)
	}
}

// Exclude drops the waits of the excluded functions' goroutines.
func TestParseExclude(t *testing.T) {
	data := traceScenario(t)
	res, err := Parse(bytes.NewReader(data), Options{Exclude: []string{"github.com/perfspy/perfspy/offcpu.waitOnChannel", "github.com/perfspy/perfspy/offcpu.lockContended"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Samples {
		for _, f := range s.Stack {
			if f.Func == "github.com/perfspy/perfspy/offcpu.waitOnChannel" || f.Func == "github.com/perfspy/perfspy/offcpu.lockContended" {
				t.Fatalf("excluded wait kept: %s %s", s.Reason, f.Func)
			}
		}
	}
	if time.Duration(res.Nanos["syscall"]) < 18*time.Millisecond {
		t.Errorf("the other waits went too: %v", res.Nanos)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse(bytes.NewReader([]byte("not a trace")), Options{}); err == nil {
		t.Error("garbage: no error")
	}
	if _, err := Parse(bytes.NewReader(nil), Options{}); err == nil {
		t.Error("empty: no error")
	}
}

func TestClassify(t *testing.T) {
	// The stack is not needed for these reasons.
	for wait, want := range map[string]string{
		"chan receive": "sync", "chan send": "sync", "select": "sync", "sync": "sync", "sync.(*Cond).Wait": "sync",
		"sleep": "sleep", "GC mark assist wait for work": "gc", "preempted": "other", "system goroutine wait": "",
	} {
		if got := classify(4 /* GoWaiting */, wait, NoStackForTest); got != want {
			t.Errorf("classify(%q) = %q, want %q", wait, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/scenario.trace"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("go 1.26 trace\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := Parse(bytes.NewReader(b), Options{})
		if err != nil {
			return
		}
		for r, n := range res.Nanos {
			if n < 0 {
				t.Fatalf("negative %s time %d", r, n)
			}
		}
		_ = res.Profile("")
	})
}

// TestParseWindows: with Options.Window, only the waits that end inside a
// window count, by window, from the window's opening at the earliest.
func TestParseWindows(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("skipped: cannot trace: %v", err)
	}
	ctx := context.Background()
	time.Sleep(20 * time.Millisecond) // outside any window
	ch := make(chan struct{})
	done := make(chan struct{})
	go func() { waitOnChannel(ch); close(done) }() // blocks from before window 1
	time.Sleep(10 * time.Millisecond)
	// The bounds are the times measured here, not the nominal sleeps: a
	// loaded machine (the race detector's run) oversleeps.
	trace.Log(ctx, "w", "open 1")
	opened := time.Now()
	time.Sleep(30 * time.Millisecond)
	inWindow1 := time.Since(opened)
	close(ch)
	<-done
	trace.Log(ctx, "w", "close")
	time.Sleep(20 * time.Millisecond) // outside again
	trace.Log(ctx, "w", "open 2")
	slept := time.Now()
	sleepInSyscall(15 * time.Millisecond)
	inSyscall := time.Since(slept)
	trace.Log(ctx, "w", "close")
	trace.Stop()
	res, err := Parse(bytes.NewReader(buf.Bytes()), Options{Window: "w"})
	if err != nil {
		t.Fatal(err)
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	w1, w2 := res.Windows["1"], res.Windows["2"]
	t.Logf("window 1 %v, window 2 %v; measured here: %v of window 1 before the wake-up, %v in nanosleep", w1, w2, inWindow1, inSyscall)
	// The channel wait began 10 ms before window 1: only its part in it
	// counts, not those 10 ms.
	in1 := ms(inWindow1.Nanoseconds())
	if s := ms(w1["sync"]); s < in1-1 || s > in1+5 {
		t.Errorf("window 1 sync %.1f ms, want about %.1f (its part of the wait)", s, in1)
	}
	// In nanosleep all 15 ms, and no longer than measured here (which also
	// holds any wait for a P after the call).
	if s, most := ms(w2["syscall"]), ms(inSyscall.Nanoseconds()); s < 14.5 || s > most+1 {
		t.Errorf("window 2 syscall %.1f ms, want 15 to %.1f", s, most)
	}
	// The one sleep that ends in a window is window 1's own.
	if s := ms(w2["sleep"] + w1["sleep"]); s > in1+5 {
		t.Errorf("sleeps outside the windows counted: %.1f ms in them, want at most %.1f", s, in1)
	}
	if len(res.Windows) != 2 {
		t.Errorf("windows %v, want 1 and 2", res.Windows)
	}
	var inWindow int64
	for _, s := range res.WindowProfile("2").Sample {
		inWindow += s.Value[0]
	}
	var sum2 int64
	for _, v := range w2 {
		sum2 += v
	}
	if inWindow != sum2 {
		t.Errorf("window 2's profile sums %d ns, its reasons %d", inWindow, sum2)
	}
}
