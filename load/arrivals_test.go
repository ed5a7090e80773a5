package load

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// stallServer answers at once, except while a lock is held: period after
// period, for stall at its start.
func stallServer(t *testing.T, stall, period time.Duration) *httptest.Server {
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		for {
			mu.Lock()
			time.Sleep(stall)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(period - stall):
			}
		}
	}()
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++ // under the lock a stall holds
		mu.Unlock()
		w.Write([]byte("ok"))
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv
}

// TestOpenLoopStall: a server that stalls 100 ms once a second. On a
// clock of 2000 requests a second, a request's latency from its intended
// send has the stall's arithmetic: the requests scheduled in the last x
// ms of a stall wait x ms, so 1% of them wait more than 100 - 10 = 90 ms
// (p99 90 ms). Timed from the actual send, as a closed loop times them,
// the same run's p99 hides the stall: only the requests in flight when
// it began (one per connection) waited.
func TestOpenLoopStall(t *testing.T) {
	if testing.Short() {
		t.Skip("3 s of load; skipped with -short")
	}
	srv := stallServer(t, 100*time.Millisecond, time.Second)
	d, err := NewLean(HTTPOptions{URL: srv.URL + "/stall", Conns: 8, Arrivals: Arrivals{Rate: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Run(context.Background(), 500*time.Millisecond); err != nil { // connections open
		t.Fatal(err)
	}
	r, err := d.Run(context.Background(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p99 := float64(r.Percentile(99)) / 1000
	raw := float64((&Result{Latency: r.RawLatency}).Percentile(99)) / 1000
	t.Logf("%d sent of %d scheduled (%d late, %d dropped); p99 %.1f ms from the intended send, %.1f ms from the actual send", r.OK, r.Scheduled, r.Late, r.Dropped, p99, raw)
	if math.Abs(p99-90)/90 > 0.05 {
		t.Errorf("p99 from the intended send %.1f ms, want 90 ms within 5%%", p99)
	}
	if raw > 20 {
		t.Errorf("p99 from the actual send %.1f ms: the closed loop's view should hide the stall", raw)
	}
	if held, why := r.Held(); !held || r.Scheduled < 5900 || r.Scheduled > 6100 {
		t.Errorf("scheduled %d sends in 3 s at 2000/s; held %v %s", r.Scheduled, held, why)
	}
}

// TestScheduleRate: the constant clock gives exactly rate sends a
// second; the Poisson clock gives that many on average, the same for the
// same seed.
func TestScheduleRate(t *testing.T) {
	start := time.Unix(0, 0)
	count := func(a Arrivals) int {
		s := newSchedule(start, a)
		n := 0
		for s.take().Before(start.Add(10 * time.Second)) {
			n++
		}
		return n
	}
	if n := count(Arrivals{Rate: 3000}); n < 30000 || n > 30001 {
		t.Errorf("constant 3000/s: %d sends in 10 s", n)
	}
	p := count(Arrivals{Rate: 3000, Poisson: true, Seed: 7})
	if math.Abs(float64(p)-30000) > 3*math.Sqrt(30000) || p != count(Arrivals{Rate: 3000, Poisson: true, Seed: 7}) {
		t.Errorf("poisson 3000/s: %d sends in 10 s", p)
	}
}
