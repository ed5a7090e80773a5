package load

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The server's own count is the oracle: every request the driver counts
// started and ended in the phase, and no other request reached the server.
func TestHTTPCountsMatchServer(t *testing.T) {
	var served, failed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			failed.Add(1)
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		served.Add(1)
		w.Write([]byte(strings.Repeat("x", 100)))
	}))
	defer srv.Close()

	d, err := NewHTTP(HTTPOptions{URL: srv.URL + "/ok", Conns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	warm, err := d.Run(context.Background(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Counts only, no timing: on a busy machine a worker may not have
	// dialed before a 100 ms warm-up ended, and dials in the window
	// instead; what keep-alive guarantees is that no connection is
	// dialed twice.
	s0 := served.Load()
	r, err := d.Run(context.Background(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := served.Load() - s0; got != r.OK {
		t.Errorf("driver counted %d successes, server served %d", r.OK, got)
	}
	if warm.Dials+r.Dials != 4 {
		t.Errorf("warm-up and window opened %d+%d connections, want 4 in all: keep-alive reuses them", warm.Dials, r.Dials)
	}
	if r.Errors != 0 || r.Non2xx != 0 || r.OK == 0 {
		t.Errorf("result %+v", r)
	}
	if r.Latency.TotalCount() != r.OK {
		t.Errorf("latency histogram holds %d values for %d successes", r.Latency.TotalCount(), r.OK)
	}
	if r.Percentile(50) <= 0 || r.Percentile(99) < r.Percentile(50) {
		t.Errorf("percentiles p50 %d p99 %d", r.Percentile(50), r.Percentile(99))
	}

	bad, _ := NewHTTP(HTTPOptions{URL: srv.URL + "/fail", Conns: 2})
	defer bad.Close()
	rb, err := bad.Run(context.Background(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if rb.OK != 0 || rb.Non2xx != failed.Load() || !strings.Contains(rb.FirstErr, "500") {
		t.Errorf("non-2xx result %+v, server failed %d", rb, failed.Load())
	}
}

func TestHTTPTransportErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	d, _ := NewHTTP(HTTPOptions{URL: url, Conns: 1})
	defer d.Close()
	r, err := d.Run(context.Background(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors == 0 || r.OK != 0 || r.FirstErr == "" {
		t.Errorf("result against a closed port: %+v", r)
	}
}

func TestHTTPBadOptions(t *testing.T) {
	if _, err := NewHTTP(HTTPOptions{}); err == nil {
		t.Error("no URL: no error")
	}
	d, _ := NewHTTP(HTTPOptions{URL: "http://127.0.0.1:1/"})
	if _, err := d.Run(context.Background(), 0); err == nil {
		t.Error("zero duration: no error")
	}
}

func TestHTTPStopsOnCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	d, _ := NewHTTP(HTTPOptions{URL: srv.URL, Conns: 2})
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	if _, err := d.Run(ctx, time.Minute); err == nil {
		t.Error("cancelled run: no error")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("run took %v after cancel", time.Since(start))
	}
}

// RunN sends exactly n requests.
func TestHTTPRunN(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	defer srv.Close()
	d, _ := NewHTTP(HTTPOptions{URL: srv.URL, Conns: 3})
	defer d.Close()
	r, err := d.RunN(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 1000 || served.Load() != 1000 {
		t.Errorf("RunN(1000): %d OK, server saw %d", r.OK, served.Load())
	}
	if _, err := d.RunN(context.Background(), 0); err == nil {
		t.Error("RunN(0): no error")
	}
}

// Paced sends n requests, one at a time, gap apart.
func TestHTTPPaced(t *testing.T) {
	var served, inFlight, overlap atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inFlight.Add(1) > 1 {
			overlap.Add(1)
		}
		served.Add(1)
		inFlight.Add(-1)
	}))
	defer srv.Close()
	d, _ := NewHTTP(HTTPOptions{URL: srv.URL, Conns: 3})
	defer d.Close()
	const gap = 2 * time.Millisecond
	var polls atomic.Int64
	r, err := Paced(context.Background(), d, 50, gap, func() bool { return polls.Add(1)%3 == 0 })
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 50 || served.Load() != 50 || r.Latency.TotalCount() != 50 {
		t.Errorf("Paced(50): %d OK, %d latencies, server saw %d", r.OK, r.Latency.TotalCount(), served.Load())
	}
	if overlap.Load() != 0 {
		t.Errorf("%d requests overlapped another", overlap.Load())
	}
	if r.Elapsed < 50*gap {
		t.Errorf("50 requests %v apart took %v", gap, r.Elapsed)
	}
	if polls.Load() != 150 {
		t.Errorf("idle polled %d times for 50 requests, want 3 each", polls.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Paced(ctx, d, 10, gap, nil); err == nil {
		t.Error("Paced with a cancelled context: no error")
	}
	if _, err := Paced(context.Background(), d, 0, gap, nil); err == nil {
		t.Error("Paced(0): no error")
	}
}

// TestAnswersHTTP1: an HTTP/1 server answers the probe that -proto auto
// sends before any gRPC preface; a server that closes on it (as a gRPC
// server does on a request line) does not.
func TestAnswersHTTP1(t *testing.T) {
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods = append(methods, r.Method+" "+r.URL.Path)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if !AnswersHTTP1(context.Background(), addr, "/get") {
		t.Error("an HTTP/1 server was not taken for one")
	}
	if len(methods) != 1 || methods[0] != "GET /get" {
		t.Errorf("the server saw %v, want one GET /get (no PRI *)", methods)
	}
	// Not an HTTP/2 preface: a gRPC server reads it and hangs up.
	if AnswersHTTP1(context.Background(), hangUp(t, 24), "/") {
		t.Error("a server that hangs up was taken for HTTP/1")
	}
}

// hangUp is the address of a TCP listener that reads up to n bytes of
// each connection, then closes it without a word.
func hangUp(t *testing.T, n int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n > 0 {
				c.Read(make([]byte, n))
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}
