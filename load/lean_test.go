package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// next is a second response after each case: the parser must stop
// exactly at the end of the first.
const next = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		head      bool
		status    int
		closeConn bool
		err       string // a part of the error; "" for none
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello", false, 200, false, ""},
		{"lf only", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", false, 200, false, ""},
		{"case", "HTTP/1.0 404 Not Found\r\ncontent-LENGTH: 3\r\n\r\nnot", false, 404, false, ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n", false, 200, false, ""},
		{"continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", false, 201, false, ""},
		{"no content", "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", false, 204, false, ""},
		{"not modified", "HTTP/1.1 304 Not Modified\r\n\r\n", false, 304, false, ""},
		{"head", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", true, 200, false, ""},
		{"close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false, 200, true, ""},
		{"no reason", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false, 200, false, ""},
		{"bad status line", "HTTP/2 200 OK\r\n\r\n", false, 0, true, "malformed status line"},
		{"bad code", "HTTP/1.1 2x0 OK\r\n\r\n", false, 0, true, "malformed status code"},
		{"bad header", "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", false, 0, true, "malformed header line"},
		{"folded header", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", false, 0, true, "malformed header line"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", false, 0, true, "bad Content-Length"},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, 0, true, "bad Content-Length"},
		{"gzip encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false, 0, true, "unsupported Transfer-Encoding"},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, 200, true, "bad chunk size"},
		{"chunk without crlf", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n", false, 200, true, "chunk not followed by CRLF"},
		{"switching", "HTTP/1.1 101 Switching Protocols\r\n\r\n", false, 101, true, "does not upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tc.in + next))
			status, closeConn, err := ReadResponse(r, tc.head)
			if tc.err != "" {
				var re *ResponseError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || status != tc.status || closeConn != tc.closeConn {
				t.Fatalf("= %d, close %v, %v; want %d, close %v", status, closeConn, err, tc.status, tc.closeConn)
			}
			if s, _, err := ReadResponse(r, false); err != nil || s != 200 {
				t.Fatalf("the next response: %d %v: the first was not read to its end", s, err)
			}
			if _, err := r.ReadByte(); err != io.EOF {
				t.Errorf("bytes left after the second response")
			}
		})
	}
	// Truncated responses are errors, whatever was cut.
	full := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
	for i := 0; i < len(full); i++ {
		if _, _, err := ReadResponse(bufio.NewReader(strings.NewReader(full[:i])), false); err == nil {
			t.Errorf("cut at %d: no error", i)
		}
	}
	// A body that runs to the end of the connection closes it.
	if s, c, err := ReadResponse(bufio.NewReader(strings.NewReader("HTTP/1.0 200 OK\r\n\r\nall of it")), false); s != 200 || !c || err != nil {
		t.Errorf("body to EOF: %d, close %v, %v", s, c, err)
	}
}

// FuzzReadResponse: no input panics the parser, and what it accepts
// net/http accepts with the same status.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		next,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 500 Oops\r\nConnection: close\r\n\r\nbody",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, head bool) {
		status, _, err := ReadResponse(bufio.NewReaderSize(bytes.NewReader(b), 4096), head)
		if err != nil {
			return
		}
		if status < 200 || status > 999 {
			t.Fatalf("accepted status %d", status)
		}
		method := "GET"
		if head {
			method = "HEAD"
		}
		// net/http returns 1xx responses; the final one follows.
		br := bufio.NewReader(bytes.NewReader(b))
		var resp *http.Response
		for {
			resp, err = http.ReadResponse(br, &http.Request{Method: method})
			if err != nil {
				return // net/http is stricter in places (e.g. header names)
			}
			resp.Body.Close()
			if resp.StatusCode >= 200 {
				break
			}
		}
		if resp.StatusCode != status {
			t.Fatalf("status %d, net/http says %d", status, resp.StatusCode)
		}
	})
}

// TestLeanDriver runs the driver against net/http's server: lengths,
// chunked bodies, a status other than 2xx, Connection: close, a POST body.
func TestLeanDriver(t *testing.T) {
	var gotBody atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "part %d ", i)
				w.(http.Flusher).Flush()
			}
		case "/missing":
			http.NotFound(w, r)
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		case "/post":
			b, _ := io.ReadAll(r.Body)
			gotBody.Store(string(b))
			w.Write(bytes.Repeat([]byte("x"), 100000))
		default:
			w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path, method string
		body         []byte
		ok, non2xx   int64
		dials        int64
	}{
		{"/", "GET", nil, 50, 0, 2},
		{"/chunked", "GET", nil, 50, 0, 2},
		{"/missing", "GET", nil, 0, 50, 2},
		{"/close", "GET", nil, 50, 0, 50},
		{"/post", "POST", []byte("payload"), 50, 0, 2},
		{"/", "HEAD", nil, 50, 0, 2},
	} {
		d, err := NewLean(HTTPOptions{URL: srv.URL + tc.path, Method: tc.method, Body: tc.body, Conns: 2, Headers: map[string]string{"X-Test": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.RunN(context.Background(), 50)
		d.Close()
		// Kept-alive connections: one per worker that got to send (a fast
		// worker may send all 50); Connection: close, one per request.
		if err != nil || r.OK != tc.ok || r.Non2xx != tc.non2xx || r.Errors != 0 || r.Dials < 1 || r.Dials > tc.dials || (tc.dials == 50 && r.Dials != 50) {
			t.Errorf("%s %s: %+v, %v; want %d ok, %d non-2xx, at most %d dials", tc.method, tc.path, r, err, tc.ok, tc.non2xx, tc.dials)
		}
	}
	if got, _ := gotBody.Load().(string); got != "payload" {
		t.Errorf("the server read body %q", got)
	}
}

// TestLeanNoAllocations: in the steady state a request allocates nothing,
// against a server that allocates nothing either (the count is the whole
// process's).
func TestLeanNoAllocations(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: application/json\r\n\r\n{\"ok\": true}\n")
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			// One request per read: the driver waits for each response.
			if bytes.HasSuffix(buf[:n], []byte("\r\n\r\n")) {
				if _, err := c.Write(resp); err != nil {
					return
				}
			}
		}
	}()
	d, err := NewLean(HTTPOptions{URL: "http://" + ln.Addr().String() + "/json", Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	res := &Result{Latency: newHistogram()}
	step := d.step(ctx)
	step(0, res) // dial
	allocs := testing.AllocsPerRun(2000, func() { step(0, res) })
	if allocs != 0 || res.OK != 2002 {
		t.Errorf("%.2f allocations per request, %d successes of 2002", allocs, res.OK)
	}
}

func TestNewLeanErrors(t *testing.T) {
	for _, u := range []string{"", "ftp://127.0.0.1:1/", "127.0.0.1:80", "http://"} {
		if _, err := NewLean(HTTPOptions{URL: u}); err == nil {
			t.Errorf("NewLean(%q): no error", u)
		}
	}
	d, err := NewLean(HTTPOptions{URL: "http://127.0.0.1:1/x?y=1", Method: "POST", Body: []byte("b"), Headers: map[string]string{"B": "2", "A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "POST /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nA: 1\r\nB: 2\r\nContent-Length: 1\r\n\r\nb"
	if string(d.reqs[0]) != want {
		t.Errorf("request %q, want %q", d.reqs[0], want)
	}
	// A dead target is an error, counted, not a hang.
	r, err := d.RunN(context.Background(), 2)
	if err != nil || r.Errors != 2 {
		t.Errorf("dead target: %+v, %v", r, err)
	}
	_ = time.Second
}
