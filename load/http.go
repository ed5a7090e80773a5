package load

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
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
}

// HTTP is a keep-alive HTTP/1.1 driver: Conns workers, each with its own
// connection, each sending one request at a time.
type HTTP struct {
	opt    HTTPOptions
	client *http.Client
	tr     *http.Transport
	dials  atomic.Int64
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
	d := &HTTP{opt: opt}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	d.tr = &http.Transport{
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
	}
	d.client = &http.Client{Transport: d.tr, Timeout: 30 * time.Second}
	return d, nil
}

// Close closes idle connections.
func (d *HTTP) Close() error {
	d.tr.CloseIdleConnections()
	return nil
}

// Run implements Driver.
func (d *HTTP) Run(ctx context.Context, dur time.Duration) (*Result, error) {
	return d.runWith(func(step func(int, *Result)) (*Result, error) { return phase(ctx, dur, d.opt.Conns, step) }, ctx)
}

// RunN implements Driver.
func (d *HTTP) RunN(ctx context.Context, n int) (*Result, error) {
	return d.runWith(func(step func(int, *Result)) (*Result, error) { return phaseN(ctx, n, d.opt.Conns, step) }, ctx)
}

func (d *HTTP) runWith(ph func(step func(int, *Result)) (*Result, error), ctx context.Context) (*Result, error) {
	dials0 := d.dials.Load()
	bufs := make([][]byte, d.opt.Conns)
	res, err := ph(func(i int, r *Result) {
		if bufs[i] == nil {
			bufs[i] = make([]byte, 32<<10)
		}
		d.one(ctx, r, bufs[i])
	})
	if res != nil {
		res.Dials = d.dials.Load() - dials0
	}
	return res, err
}

func (d *HTTP) one(ctx context.Context, r *Result, buf []byte) {
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
	resp, err := d.client.Do(req)
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
