package load

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// h2cServer serves HTTP/2 with prior knowledge (and HTTP/1.1) on a
// loopback port: 200 on /ok (the request's body echoed, its method and
// the header X-Probe counted), 404 elsewhere.
func h2cServer(t *testing.T) (addr string, seen *atomic.Int64, probeHeaders *atomic.Int64) {
	t.Helper()
	seen, probeHeaders = new(atomic.Int64), new(atomic.Int64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		seen.Add(1)
		if r.Header.Get("X-Probe") == "1" {
			probeHeaders.Add(1)
		}
		if r.URL.Path != "/ok" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(append([]byte(r.Method+" "), b...))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), seen, probeHeaders
}

// TestH2LeanDriver: every request reaches the server as HTTP/2, with its
// headers and body; 404s are Non2xx; the steady state allocates nothing.
func TestH2LeanDriver(t *testing.T) {
	addr, seen, probes := h2cServer(t)
	for _, tc := range []struct {
		path, method, body string
		ok                 bool
	}{{"/ok", "GET", "", true}, {"/ok", "POST", strings.Repeat("b", 3000), true}, {"/ok", "PUT", "x", true}, {"/missing", "GET", "", false}} {
		seen.Store(0)
		probes.Store(0)
		d, err := NewH2Lean(HTTPOptions{URL: "http://" + addr + tc.path, Method: tc.method, Body: []byte(tc.body), Conns: 3, Headers: map[string]string{"X-Probe": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.RunN(context.Background(), 300)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		ok, non := r.OK, r.Non2xx
		if !tc.ok {
			ok, non = non, ok
		}
		if ok != 300 || non != 0 || r.Errors != 0 || r.Dials != 3 || seen.Load() != 300 || probes.Load() != 300 {
			t.Errorf("%s %s: %d ok, %d non-2xx, %d errors (%s), %d dials; the server saw %d, %d with the header", tc.method, tc.path, r.OK, r.Non2xx, r.Errors, r.FirstErr, r.Dials, seen.Load(), probes.Load())
		}
	}
	// The steady state, against a server that allocates nothing either
	// (AllocsPerRun counts every goroutine's).
	d, err := NewH2Lean(HTTPOptions{URL: "http://" + cannedH2Server(t) + "/ok", Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res := &Result{Latency: newHistogram()}
	step := d.step(context.Background())
	step(0, res) // dial, the server's SETTINGS
	step(0, res)
	allocs := testing.AllocsPerRun(2000, func() { step(0, res) })
	if allocs != 0 || res.OK != 2003 {
		t.Errorf("%.2f allocations per request, %d successes of 2003 (%s)", allocs, res.OK, res.FirstErr)
	}
}

func TestNewH2LeanErrors(t *testing.T) {
	for _, tc := range []struct {
		opt  HTTPOptions
		want string
	}{
		{HTTPOptions{}, "no URL"},
		{HTTPOptions{URL: "https://x/"}, "http://"},
		{HTTPOptions{URL: "http://x/", Mix: []Request{{Path: "/"}}}, "one request"},
		{HTTPOptions{URL: "http://x/", Body: make([]byte, MaxLeanH2Body+1)}, "at most"},
	} {
		if _, err := NewH2Lean(tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opt.URL, err, tc.want)
		}
	}
}

// cannedH2Server answers each request stream of one h2c connection with
// the same frames (HEADERS :status 200, DATA "ok"), allocating nothing
// per request.
func cannedH2Server(t *testing.T) string {
	return acceptOne(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := io.ReadFull(br, make([]byte, len(h2Preface))); err != nil {
			return
		}
		resp := h2Frame(nil, h2Headers, h2EndHeaders, 0, []byte{0x88}) // :status 200
		resp = h2Frame(resp, h2Data, h2EndStream, 0, []byte("ok"))
		head, payload := make([]byte, 9), make([]byte, 1<<16)
		for {
			if _, err := io.ReadFull(br, head); err != nil {
				return
			}
			n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
			if n > len(payload) {
				return
			}
			if _, err := io.ReadFull(br, payload[:n]); err != nil {
				return
			}
			if head[3] == h2Headers && head[4]&h2EndStream != 0 {
				copy(resp[5:9], head[5:9])
				copy(resp[15:19], head[5:9])
				if _, err := c.Write(resp); err != nil {
					return
				}
			}
		}
	})
}
