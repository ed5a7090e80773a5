package load

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Lean is an HTTP/1.1 keep-alive driver that costs the load side as
// little as it can, so that light handlers, not the driver, set the pace:
// each request is serialized once, responses are read by a small strict
// parser (status line, headers, Content-Length and chunked bodies,
// Connection: close, 1xx), every response is checked (status class, the
// whole body read), and the steady state allocates nothing per request.
// Successes are counted as HTTP counts them: a 2xx response read whole.
type Lean struct {
	opt   HTTPOptions
	addr  string
	reqs  [][]byte // the requests, serialized once: one, or a mix's
	heads []bool   // a HEAD request: its response has no body
	order []int    // the mix's order of reqs
	next  atomic.Uint64
	tls   *tls.Config // https: the connections' TLS
	mu    sync.Mutex
	conns []*leanConn // one per worker, kept across phases
	workers
	// tagging: while on, each worker keeps its requests' latencies keyed
	// as the server's overlay names them (Tags).
	tagBook
}

// Tag is the driver's latency for one request, keyed as the server's
// overlay names it on the request's bill: the connection's local port in
// bits 48 up and, below, the request's number on the connection (HTTP/1,
// from 1) or its stream id (HTTP/2). US is from the request's send to its
// response's end.
type Tag struct {
	Peer uint64
	US   int64
}

// A Tagger keys its requests' latencies while tagging is on (the lean
// HTTP/1 and HTTP/2 drivers): Tags returns those of the requests answered
// since it was last called.
type Tagger interface {
	Tagging(on bool)
	Tags() []Tag
}

// tagBook keeps each worker's keyed latencies while tagging is on; a
// worker appends to its own list only, and Tags is called between phases.
type tagBook struct {
	tagOn atomic.Bool
	tagMu sync.Mutex
	tags  [][]Tag
}

// Tagging turns the keyed latencies on or off.
func (t *tagBook) Tagging(on bool) { t.tagOn.Store(on) }

// Tags returns the keyed latencies of the requests answered with a 2xx
// since the last call, and forgets them. Call it between phases.
func (t *tagBook) Tags() []Tag {
	t.tagMu.Lock()
	defer t.tagMu.Unlock()
	var out []Tag
	for i, l := range t.tags {
		out = append(out, l...)
		t.tags[i] = l[:0]
	}
	return out
}

// tagged keeps worker i's latency for the request keyed peer, sent at t0.
func (t *tagBook) tagged(i int, peer uint64, t0 time.Time) {
	t.tags[i] = append(t.tags[i], Tag{Peer: peer, US: max(time.Since(t0).Microseconds(), 1)})
}

type leanConn struct {
	c net.Conn
	r *bufio.Reader
	// port is its local port; n the requests sent on it.
	port, n uint64
	// refresh is when the connection's deadline is next moved: setting a
	// deadline changes two runtime timers under the descriptor's lock,
	// which costs the driver more than it saves per request, so it is set
	// to 30 s ahead at most every 10 s.
	refresh time.Time
}

// Deadlines: a stuck exchange fails after leanTimeout at most, and after
// leanTimeout-leanRefresh at least.
const (
	leanTimeout = 30 * time.Second
	leanRefresh = 10 * time.Second
)

// NewLean returns a lean driver for opt.
func NewLean(opt HTTPOptions) (*Lean, error) {
	if opt.URL == "" {
		return nil, errors.New("load: no URL")
	}
	u, err := url.Parse(opt.URL)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("load: the lean driver speaks http:// and https:// only, not %q", opt.URL)
	}
	if opt.Method == "" {
		opt.Method = "GET"
	}
	if opt.Conns <= 0 {
		opt.Conns = 8
	}
	d := &Lean{opt: opt, addr: u.Host, conns: make([]*leanConn, opt.Conns), tagBook: tagBook{tags: make([][]Tag, opt.Conns)}}
	d.workers.n, d.workers.step, d.workers.arrivals = opt.Conns, d.step, opt.Arrivals
	d.workers.abort = func() { d.Close() }
	port := "80"
	if u.Scheme == "https" {
		d.tls, port = opt.TLS, "443"
		if d.tls == nil {
			d.tls = &tls.Config{}
		}
		if d.tls.ServerName == "" {
			d.tls = d.tls.Clone()
			d.tls.ServerName = u.Hostname()
		}
	}
	if _, _, err := net.SplitHostPort(d.addr); err != nil {
		d.addr = net.JoinHostPort(d.addr, port)
	}
	if len(opt.Mix) == 0 {
		opt.Mix = []Request{{Method: opt.Method, Path: u.RequestURI(), Body: opt.Body, Weight: 1}}
	}
	for _, r := range opt.Mix {
		one := opt
		one.Method, one.Body, one.Headers = r.Method, r.Body, map[string]string{}
		maps.Copy(one.Headers, opt.Headers)
		maps.Copy(one.Headers, r.Headers)
		d.reqs = append(d.reqs, serializeRequest(one, r.Path, u.Host))
		d.heads = append(d.heads, r.Method == "HEAD")
	}
	d.order = Interleave(opt.Mix)
	return d, nil
}

// serializeRequest writes the request line, Host, the user's headers in
// name order, Content-Length for a body, and the body.
func serializeRequest(opt HTTPOptions, uri, host string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", opt.Method, uri, host)
	names := make([]string, 0, len(opt.Headers))
	for k := range opt.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\r\n", k, opt.Headers[k])
	}
	if opt.Body != nil || opt.Method == "POST" || opt.Method == "PUT" || opt.Method == "PATCH" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(opt.Body))
	}
	b.WriteString("\r\n")
	b.Write(opt.Body)
	return b.Bytes()
}

// Close closes the connections.
func (d *Lean) Close() error {
	closeConns(&d.mu, d.conns, func(c *leanConn) { c.c.Close() })
	return nil
}

// closeConns closes each connection of a driver's workers and forgets it,
// under the lock that guards them.
func closeConns[C any](mu *sync.Mutex, conns []*C, closeOne func(*C)) {
	mu.Lock()
	defer mu.Unlock()
	for i, c := range conns {
		if c != nil {
			closeOne(c)
			conns[i] = nil
		}
	}
}

// step is one request of worker i: sent on its connection (dialled when
// it has none), the response read whole; a status other than 2xx is a
// Non2xx.
func (d *Lean) step(ctx context.Context) func(i int, r *Result) {
	return countedStep(ctx, func(ctx context.Context, i int) error {
		status, err := d.exchange(ctx, i)
		if err == nil && (status < 200 || status > 299) {
			return statusError(status)
		}
		return err
	})
}

// exchange sends the request on worker i's connection and reads the
// response; a connection that failed or that the server closes is dropped,
// and the next request dials a new one.
func (d *Lean) exchange(ctx context.Context, i int) (int, error) {
	c := d.conns[i]
	if c == nil {
		nc, err := d.dial(ctx)
		if err != nil {
			return 0, err
		}
		d.dials.Add(1)
		c = &leanConn{c: nc, r: bufio.NewReaderSize(nc, 32<<10)}
		if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
			c.port = uint64(a.Port)
		}
		d.mu.Lock()
		d.conns[i] = c
		d.mu.Unlock()
	}
	k := 0
	if len(d.reqs) > 1 {
		k = d.order[(d.next.Add(1)-1)%uint64(len(d.order))]
	}
	if now := time.Now(); now.After(c.refresh) {
		c.c.SetDeadline(now.Add(leanTimeout))
		c.refresh = now.Add(leanRefresh)
	}
	c.n++
	var t0 time.Time
	tagging := d.tagOn.Load()
	if tagging {
		t0 = time.Now()
	}
	if _, err := c.c.Write(d.reqs[k]); err != nil {
		d.drop(i, c)
		return 0, err
	}
	status, closeConn, err := ReadResponse(c.r, d.heads[k])
	if tagging && err == nil && status >= 200 && status <= 299 && c.port != 0 {
		d.tagged(i, c.port<<48|c.n&(1<<48-1), t0)
	}
	if err != nil || closeConn {
		d.drop(i, c)
	}
	return status, err
}

// dial opens a connection, with its TLS handshake done for https.
func (d *Lean) dial(ctx context.Context) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if d.tls == nil {
		c, err := dialer.DialContext(ctx, "tcp", d.addr)
		if err != nil {
			return nil, err
		}
		return withRawIO(c), nil
	}
	return (&tls.Dialer{NetDialer: dialer, Config: d.tls}).DialContext(ctx, "tcp", d.addr)
}

// drop closes worker i's connection; its next request dials a new one.
func (d *Lean) drop(i int, c *leanConn) {
	c.c.Close()
	d.mu.Lock()
	d.conns[i] = nil
	d.mu.Unlock()
}

// ResponseError is a response the parser refuses: what was wrong, and the
// line it was on.
type ResponseError struct {
	What string
	Line string
}

func (e *ResponseError) Error() string {
	if e.Line == "" {
		return "load: bad response: " + e.What
	}
	return fmt.Sprintf("load: bad response: %s: %q", e.What, e.Line)
}

// maxLine bounds a status, header or chunk-size line.
const maxLine = 16 << 10

// ReadResponse reads one HTTP/1.1 response from r, its body discarded,
// and returns its status and whether the connection must be closed after
// it (Connection: close, or a body delimited by the end of the
// connection). 1xx responses before the final one are skipped. head says
// the request was HEAD: the response has no body whatever its headers say.
// It allocates nothing for a well-formed response.
func ReadResponse(r *bufio.Reader, head bool) (status int, closeConn bool, err error) {
	for {
		status, err = readStatus(r)
		if err != nil {
			return 0, true, err
		}
		h, err := readHeaders(r)
		if err != nil {
			return 0, true, err
		}
		if status >= 100 && status < 200 {
			if status == 101 {
				return status, true, &ResponseError{What: "101 Switching Protocols: the driver does not upgrade"}
			}
			continue
		}
		closeConn = h.close
		switch {
		case head || status == 204 || status == 304:
		case h.chunked:
			err = discardChunked(r)
		case h.length >= 0:
			_, err = r.Discard(int(h.length))
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
		default:
			// No length: the body runs to the end of the connection.
			_, err = io.Copy(io.Discard, r)
			closeConn = true
		}
		if err != nil {
			return status, true, err
		}
		return status, closeConn, nil
	}
}

// line reads one CRLF- (or LF-) terminated line without its end.
func line(r *bufio.Reader) ([]byte, error) {
	l, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(l) > maxLine {
		return nil, &ResponseError{What: "line too long"}
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(l) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	l = l[:len(l)-1]
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l, nil
}

// readStatus reads "HTTP/1.x NNN reason".
func readStatus(r *bufio.Reader) (int, error) {
	l, err := line(r)
	if err != nil {
		return 0, err
	}
	if len(l) < 12 || !bytes.HasPrefix(l, []byte("HTTP/1.")) || (l[7] != '0' && l[7] != '1') || l[8] != ' ' || (len(l) > 12 && l[12] != ' ') {
		return 0, &ResponseError{What: "malformed status line", Line: string(l)}
	}
	code := 0
	for _, c := range l[9:12] {
		if c < '0' || c > '9' {
			return 0, &ResponseError{What: "malformed status code", Line: string(l)}
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return 0, &ResponseError{What: "status code below 100", Line: string(l)}
	}
	return code, nil
}

// headers are what the parser needs of a response's header fields.
type headers struct {
	length  int64 // Content-Length, -1 when absent
	chunked bool
	close   bool
}

var (
	hdrLength   = []byte("content-length")
	hdrEncoding = []byte("transfer-encoding")
	hdrConn     = []byte("connection")
)

// readHeaders reads header lines up to the empty line.
func readHeaders(r *bufio.Reader) (headers, error) {
	h := headers{length: -1}
	for n := 0; ; n++ {
		l, err := line(r)
		if err != nil {
			return h, err
		}
		if len(l) == 0 {
			return h, nil
		}
		if n == 256 {
			return h, &ResponseError{What: "more than 256 header lines"}
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 || l[0] == ' ' || l[0] == '\t' {
			return h, &ResponseError{What: "malformed header line", Line: string(l)}
		}
		name, value := l[:colon], bytes.TrimSpace(l[colon+1:])
		switch {
		case asciiEqualFold(name, hdrLength):
			v, ok := parseDecimal(value)
			if !ok || (h.length >= 0 && v != h.length) {
				return h, &ResponseError{What: "bad Content-Length", Line: string(l)}
			}
			h.length = v
		case asciiEqualFold(name, hdrEncoding):
			if !asciiEqualFold(value, []byte("chunked")) {
				return h, &ResponseError{What: "unsupported Transfer-Encoding", Line: string(l)}
			}
			h.chunked = true
		case asciiEqualFold(name, hdrConn):
			if asciiEqualFold(value, []byte("close")) {
				h.close = true
			}
		}
	}
}

// discardChunked reads a chunked body and its trailers.
func discardChunked(r *bufio.Reader) error {
	for {
		l, err := line(r)
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(l, ';'); i >= 0 {
			l = l[:i] // chunk extensions
		}
		size, ok := parseHex(bytes.TrimSpace(l))
		if !ok {
			return &ResponseError{What: "bad chunk size", Line: string(l)}
		}
		if size == 0 {
			// Trailers, up to the empty line.
			_, err := readHeaders(r)
			return err
		}
		if _, err := r.Discard(int(size)); err != nil {
			return io.ErrUnexpectedEOF
		}
		end, err := line(r)
		if err != nil {
			return err
		}
		if len(end) != 0 {
			return &ResponseError{What: "chunk not followed by CRLF", Line: string(end)}
		}
	}
}

func asciiEqualFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// parseDecimal parses a non-negative decimal of at most 18 digits.
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// parseHex parses a chunk size: at most 15 hex digits.
func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | int64(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | int64(c-'a'+10)
		case 'A' <= c && c <= 'F':
			v = v<<4 | int64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
