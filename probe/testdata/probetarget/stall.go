package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
	"sync"
	"time"
)

// stall serves /stall: a lock a goroutine holds 100 ms once a second
// (from the first /stall on); each request takes it, so those that come
// during the hold wait for its end. An open-loop driver's p99 is then the
// stall's arithmetic: the hold less 1% of the second, plus the time the
// backlog takes to drain up to that request. The target measures both
// sides of that sum and, when PROBETARGET_STALL_LOG names a file, appends
// one JSON line a stall (stallLine) for tests to hold the driver's p99 to.
type stall struct {
	mu       sync.Mutex
	once     sync.Once
	released time.Time       // the last hold's end; written by the holder under mu
	after    []time.Duration // the first acquisitions after it, from it
	log      *os.File
}

// stallLine is one hold: how long the lock was held and, for the first 64
// requests that took it afterwards (the backlog, in the driver's order),
// how long after the release each did.
type stallLine struct {
	HoldUS  float64   `json:"hold_us"`
	AfterUS []float64 `json:"after_us"`
}

const stallKept = 64

func newStall() *stall {
	s := &stall{}
	if path := os.Getenv("PROBETARGET_STALL_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			log.Fatalf("stall log: %v", err)
		}
		s.log = f
	}
	return s
}

func (s *stall) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.once.Do(func() { go s.hold() })
	s.mu.Lock()
	if !s.released.IsZero() && len(s.after) < stallKept {
		s.after = append(s.after, time.Since(s.released))
	}
	s.mu.Unlock()
	w.Write([]byte("ok"))
}

func (s *stall) hold() {
	var last stallLine
	for {
		s.mu.Lock()
		start := time.Now()
		after := s.after
		s.after = nil
		time.Sleep(100 * time.Millisecond)
		s.released = time.Now()
		s.mu.Unlock()
		// The previous hold's backlog drained long ago: write it now,
		// outside the lock and away from this hold's drain.
		s.write(last, after)
		last = stallLine{HoldUS: float64(s.released.Sub(start)) / 1e3}
		time.Sleep(900 * time.Millisecond)
	}
}

func (s *stall) write(l stallLine, after []time.Duration) {
	if s.log == nil || l.HoldUS == 0 {
		return
	}
	for _, d := range after {
		l.AfterUS = append(l.AfterUS, float64(d)/1e3)
	}
	b, _ := json.Marshal(l)
	s.log.Write(append(b, '\n'))
}
