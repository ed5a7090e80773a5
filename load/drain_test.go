package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestPhaseEndsAtDeadline: a server that never answers one request in 50
// ends each phase at its deadline and drain allowance, not at the
// driver's 30 s request timeout: the requests in flight are abandoned,
// counted apart from the errors, closed and open loop alike; the next
// phase dials anew and runs.
func TestPhaseEndsAtDeadline(t *testing.T) {
	var n atomic.Int64
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%50 == 0 {
			select { // never answers, until the test ends
			case <-block:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	defer close(block)
	for _, rate := range []float64{0, 500} {
		d, err := NewLean(HTTPOptions{URL: srv.URL, Conns: 4, Arrivals: Arrivals{Rate: rate}})
		if err != nil {
			t.Fatal(err)
		}
		for phase := 0; phase < 2; phase++ {
			start := time.Now()
			r, err := d.Run(context.Background(), 500*time.Millisecond)
			took := time.Since(start)
			t.Logf("rate %v phase %d: %v, %d ok, %d errors, %d abandoned (drain %v)", rate, phase, took.Round(time.Millisecond), r.OK, r.Errors, r.Abandoned, r.Drain)
			limit := 500*time.Millisecond + drainAllowance(500*time.Millisecond) + openGrace + abortWait + time.Second
			if err != nil || took > limit || r.Abandoned < 1 || r.Errors != 0 || r.OK == 0 {
				t.Errorf("rate %v phase %d: %v after %v (limit %v): %+v", rate, phase, err, took, limit, r)
			}
		}
		d.Close()
	}
}
