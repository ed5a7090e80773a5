package load

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// HTTPOptions configures an HTTP keep-alive driver. Zero fields get defaults.
type HTTPOptions struct {
	URL    string // full URL, e.g. http://127.0.0.1:8080/json
	Method string // default GET
	Body   []byte // sent with every request
	Conns  int    // concurrent keep-alive connections, default 8
	// Headers are added to every request (e.g. Accept-Encoding: gzip;
	// the driver asks for no compression by itself).
	Headers map[string]string
	// TLS configures https URLs (nil: verify with the system's roots).
	TLS *tls.Config
	// Mix, for the lean driver, replaces Method, the URL's path, Body and
	// adds its headers: the requests are sent in Interleave's order, each
	// worker taking the next.
	Mix []Request
	// Arrivals, when open, sends the requests on a clock (open-loop load).
	Arrivals Arrivals
}

// HTTP is a keep-alive HTTP/1.1 driver: Conns workers, each with its own
// connection, each sending one request at a time.
type HTTP struct {
	opt     HTTPOptions
	clients []*http.Client // worker i uses clients[i/per]
	per     int
	workers int
	closers []func()
	dials   atomic.Int64
}

// NewHTTP returns a driver for opt.
func NewHTTP(opt HTTPOptions) (*HTTP, error) {
	if opt.URL == "" {
		return nil, errors.New("load: no URL")
	}
	if opt.Method == "" {
		opt.Method = http.MethodGet
	}
	if opt.Conns <= 0 {
		opt.Conns = 8
	}
	d := &HTTP{opt: opt, per: opt.Conns, workers: opt.Conns}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d.dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        opt.Conns,
		MaxIdleConnsPerHost: opt.Conns,
		MaxConnsPerHost:     opt.Conns,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSClientConfig:     opt.TLS,
		// HTTP/1.1 over TLS too: no ALPN upgrade to HTTP/2.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	d.clients = []*http.Client{{Transport: tr, Timeout: 30 * time.Second}}
	d.closers = []func(){tr.CloseIdleConnections}
	return d, nil
}

// NewH2 returns an HTTP/2 driver: conns connections, each with streams
// concurrent streams (a worker each). An http URL speaks HTTP/2 without
// TLS, with prior knowledge (h2c); an https URL negotiates h2 with ALPN.
func NewH2(opt HTTPOptions, conns, streams int) (*HTTP, error) {
	if opt.URL == "" {
		return nil, errors.New("load: no URL")
	}
	if opt.Method == "" {
		opt.Method = http.MethodGet
	}
	conns, streams = max(conns, 1), max(streams, 1)
	h2c := strings.HasPrefix(opt.URL, "http://")
	d := &HTTP{opt: opt, per: streams, workers: conns * streams}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	protos := new(http.Protocols)
	if h2c {
		protos.SetUnencryptedHTTP2(true)
	} else {
		protos.SetHTTP2(true)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.dials.Add(1)
		return dialer.DialContext(ctx, network, addr)
	}
	for range conns {
		// One transport per connection: a transport keeps one HTTP/2
		// connection per host as long as it has room for streams.
		tr := &http.Transport{Protocols: protos, DisableCompression: true, TLSClientConfig: opt.TLS, DialContext: dial,
			DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				d.dials.Add(1)
				cfg := opt.TLS.Clone()
				if cfg == nil {
					cfg = &tls.Config{}
				}
				cfg.NextProtos = []string{"h2"}
				if cfg.ServerName == "" {
					cfg.ServerName, _, _ = net.SplitHostPort(addr)
				}
				return (&tls.Dialer{NetDialer: dialer, Config: cfg}).DialContext(ctx, network, addr)
			}}
		d.clients = append(d.clients, &http.Client{Transport: tr, Timeout: 30 * time.Second})
		d.closers = append(d.closers, tr.CloseIdleConnections)
	}
	return d, nil
}

// Close closes idle connections.
func (d *HTTP) Close() error {
	for _, c := range d.closers {
		c()
	}
	return nil
}

// Run implements Driver.
func (d *HTTP) Run(ctx context.Context, dur time.Duration) (*Result, error) {
	return d.runWith(func(step func(int, *Result)) (*Result, error) {
		return phaseAt(ctx, dur, d.workers, d.opt.Arrivals, step)
	}, ctx)
}

// RunN implements Driver.
func (d *HTTP) RunN(ctx context.Context, n int) (*Result, error) {
	return d.runWith(func(step func(int, *Result)) (*Result, error) { return phaseN(ctx, n, d.workers, step) }, ctx)
}

func (d *HTTP) runWith(ph func(step func(int, *Result)) (*Result, error), ctx context.Context) (*Result, error) {
	dials0 := d.dials.Load()
	bufs := make([][]byte, d.workers)
	res, err := ph(func(i int, r *Result) {
		if bufs[i] == nil {
			bufs[i] = make([]byte, 32<<10)
		}
		d.one(ctx, d.clients[i/d.per], r, bufs[i])
	})
	if res != nil {
		res.Dials = d.dials.Load() - dials0
	}
	return res, err
}

func (d *HTTP) one(ctx context.Context, client *http.Client, r *Result, buf []byte) {
	var body io.Reader
	if d.opt.Body != nil {
		body = bytes.NewReader(d.opt.Body)
	}
	req, err := http.NewRequestWithContext(ctx, d.opt.Method, d.opt.URL, body)
	if err != nil {
		d.fail(r, err)
		return
	}
	for k, v := range d.opt.Headers {
		req.Header.Set(k, v)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			d.fail(r, err)
		}
		return
	}
	// Read the whole body so the connection can be reused.
	_, err = io.CopyBuffer(io.Discard, resp.Body, buf)
	resp.Body.Close()
	if err != nil {
		if ctx.Err() == nil {
			d.fail(r, err)
		}
		return
	}
	us := time.Since(t0).Microseconds()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		r.OK++
		r.Latency.RecordValue(max(us, 1))
	} else {
		r.Non2xx++
		if r.FirstErr == "" {
			r.FirstErr = "status " + resp.Status
		}
	}
}

func (d *HTTP) fail(r *Result, err error) {
	r.Errors++
	if r.FirstErr == "" {
		r.FirstErr = err.Error()
	}
	// Do not spin on a dead target.
	time.Sleep(time.Millisecond)
}
