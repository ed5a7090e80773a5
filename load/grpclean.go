package load

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
)

// GRPCLean drives one unary method as GRPC does, at a fraction of its
// cost, so that a light method, not the driver, sets the pace. It speaks
// HTTP/2 without TLS (prior knowledge, as grpc-go's insecure client does):
// each call's frames (HEADERS, then the message in DATA) are encoded once,
// and only their stream id changes from call to call; replies are read
// frame by frame, their headers decoded by HPACK, and every call's status
// checked: HTTP 200, an application/grpc content type, one well-framed
// message, and grpc-status 0 in the trailers. A call with another
// grpc-status is a Non2xx. The steady state allocates nothing per call.
type GRPCLean struct {
	opt GRPCOptions
	*h2Pool
}

// h2Pool is a lean HTTP/2 driver's connections, one per worker, each
// with one stream at a time, and the frames of its request.
type h2Pool struct {
	addr string
	http bool // replies are HTTP's (a 2xx status), not gRPC's
	// A request's frames: a connection's first, the requests after it,
	// and those after the server shrank its HPACK table (headerBlock).
	first, steady, literal callFrames
	mu                     sync.Mutex
	conns                  []*h2Conn // one per worker, kept across phases
	workers
	// tagging: each call's latency keyed by the connection's local port
	// and the call's stream id, as net/http's overlay names an HTTP/2
	// request on its bill.
	tagBook
}

// h2Request is what a lean HTTP/2 driver sends: lead (the :method and
// :scheme fields, encoded), the other fields, and the DATA payload (nil
// for none).
type h2Request struct {
	lead   []byte
	fields []hpackField
	data   []byte
}

// newH2Pool makes the pool of n workers for req.
func newH2Pool(addr string, n int, arrivals Arrivals, http bool, req h2Request) *h2Pool {
	p := &h2Pool{addr: addr, http: http, conns: make([]*h2Conn, n), tagBook: tagBook{tags: make([][]Tag, n)}}
	p.workers.n, p.workers.step, p.workers.arrivals = n, p.step, arrivals
	p.workers.abort = func() { p.Close() }
	p.first = encodeFrames(headerBlock(req.lead, req.fields, blockFirst), req.data)
	p.steady = encodeFrames(headerBlock(req.lead, req.fields, blockSteady), req.data)
	p.literal = encodeFrames(headerBlock(req.lead, req.fields, blockLiteral), req.data)
	return p
}

// Frame types and flags (RFC 9113, section 6).
const (
	h2Data         = 0x0
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Settings     = 0x4
	h2Ping         = 0x6
	h2GoAway       = 0x7
	h2WindowUpdate = 0x8
	h2Continuation = 0x9

	h2EndStream  = 0x1
	h2Ack        = 0x1
	h2EndHeaders = 0x4
	h2Padded     = 0x8
	h2Priority   = 0x20

	h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	// h2MaxFrame is the frame size every peer accepts (SETTINGS_MAX_FRAME_SIZE's
	// initial value): the driver's DATA frames are never larger.
	h2MaxFrame = 16384
	// h2Window is the receive window the driver gives each stream and the
	// connection: replies never wait for a WINDOW_UPDATE.
	h2Window = 1 << 30
	// h2MaxHeaderBlock bounds a reply's header block (HEADERS and
	// CONTINUATION frames) and h2MaxPayload any frame the driver reads.
	h2MaxHeaderBlock = 1 << 20
	h2MaxPayload     = 1 << 24
)

// MaxLeanGRPCRequest is the largest request message the lean driver sends:
// one DATA frame of the size every server accepts, within the stream and
// connection windows every server starts with. A larger one goes through
// grpc-go's client (GRPC).
const MaxLeanGRPCRequest = h2MaxFrame - 5

// NewGRPCLean resolves the method and encodes the request as NewGRPC does,
// then the call's frames; it dials on the first call.
func NewGRPCLean(ctx context.Context, opt GRPCOptions) (*GRPCLean, error) {
	opt, method, req, err := grpcRequest(ctx, opt)
	if err != nil {
		return nil, err
	}
	if len(req) > MaxLeanGRPCRequest {
		return nil, fmt.Errorf("load: the request is %d bytes encoded; the lean gRPC driver sends at most %d", len(req), MaxLeanGRPCRequest)
	}
	addr := opt.Addr
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	data := make([]byte, 5+len(req)) // the message, length-prefixed
	binary.BigEndian.PutUint32(data[1:5], uint32(len(req)))
	copy(data[5:], req)
	// :method POST, :scheme http (static 3, 6)
	pool := newH2Pool(addr, opt.Conns, opt.Arrivals, false, h2Request{[]byte{0x83, 0x86}, callFields(method, opt.Addr, opt.Headers), data})
	return &GRPCLean{opt: opt, h2Pool: pool}, nil
}

// leanUserAgent is the user-agent the lean driver sends: servers see the
// same headers from it as from grpc-go's client.
const leanUserAgent = "perfspy-grpc-lean"

// callFields are the header fields of a call after :method and :scheme,
// in the order they are sent: the pseudo-headers, then content-type, te,
// user-agent and the user's metadata in name order. idx is the field's
// name in HPACK's static table (0: none).
func callFields(method, authority string, headers map[string]string) []hpackField {
	f := []hpackField{{4, ":path", method}, {1, ":authority", authority}, {31, "content-type", "application/grpc"}, {0, "te", "trailers"}, {58, "user-agent", leanUserAgent}}
	return appendHeaders(f, headers)
}

// appendHeaders appends the user's headers to f in name order, their
// names in lower case as HTTP/2 wants them.
func appendHeaders(f []hpackField, headers map[string]string) []hpackField {
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		f = append(f, hpackField{0, strings.ToLower(k), headers[k]})
	}
	return f
}

type hpackField struct {
	idx         int // the name's index in the static table, 0 for none
	name, value string
}

// The three header blocks of a call. A connection's first call adds its
// fields to the server's HPACK table (incremental indexing) and the calls
// after it name them by index, as grpc-go's client does, so that the
// server decodes what it would decode from a real client. The literal
// block never indexes: for fields too large for the table, and after the
// server shrinks its table.
const (
	blockFirst = iota
	blockSteady
	blockLiteral
)

// hpackTable is the dynamic table size every HPACK decoder starts with.
const hpackTable = 4096

// headerBlock encodes lead (the :method and :scheme fields, encoded) and
// fields as block kind says. Fields that do not fit in the table together
// are sent as literals in every kind.
func headerBlock(lead []byte, fields []hpackField, kind int) []byte {
	size := 0
	for _, f := range fields {
		size += len(f.name) + len(f.value) + 32 // RFC 7541, section 4.1
	}
	if size > hpackTable {
		kind = blockLiteral
	}
	b := append([]byte(nil), lead...)
	if kind == blockLiteral {
		b = append([]byte{0x20}, b...) // a table size update to 0: nothing indexed is named
	}
	for i, f := range fields {
		switch kind {
		case blockSteady:
			// The newest entry is 62; the first field went in first.
			b = hpackInt(b, 0x80, 7, 62+len(fields)-1-i)
		case blockFirst:
			b = hpackField6(b, f)
		default:
			b = hpackLiteral(b, f.idx, f.name, f.value)
		}
	}
	return b
}

// hpackField6 appends a literal header field with incremental indexing.
func hpackField6(b []byte, f hpackField) []byte {
	b = hpackInt(b, 0x40, 6, f.idx)
	if f.idx == 0 {
		b = hpackInt(b, 0x00, 7, len(f.name))
		b = append(b, f.name...)
	}
	b = hpackInt(b, 0x00, 7, len(f.value))
	return append(b, f.value...)
}

// callFrames is one request's frames, stream id 0, the offsets of their
// stream ids, and the size of its DATA (what the flow-control windows
// count).
type callFrames struct {
	b    []byte
	ids  []int
	data int
}

// encodeFrames writes a request's frames: HEADERS with block
// (CONTINUATION frames for the rest of a block over the frame size), then
// DATA with data and END_STREAM; without data (nil), HEADERS ends the
// stream.
func encodeFrames(block, data []byte) callFrames {
	c := callFrames{data: len(data)}
	frame := func(typ, flags byte, payload []byte) {
		n := len(payload)
		c.b = append(c.b, byte(n>>16), byte(n>>8), byte(n), typ, flags)
		c.ids = append(c.ids, len(c.b))
		c.b = append(c.b, 0, 0, 0, 0)
		c.b = append(c.b, payload...)
	}
	end := byte(0)
	if data == nil {
		end = h2EndStream
	}
	for typ := byte(h2Headers); ; typ = h2Continuation {
		if len(block) <= h2MaxFrame {
			frame(typ, h2EndHeaders|end, block)
			break
		}
		frame(typ, end, block[:h2MaxFrame])
		block, end = block[h2MaxFrame:], 0
	}
	if data != nil {
		frame(h2Data, h2EndStream, data)
	}
	return c
}

// clone is a copy of c whose stream ids a connection may patch.
func (c callFrames) clone() callFrames {
	return callFrames{b: append([]byte(nil), c.b...), ids: c.ids, data: c.data}
}

// hpackLiteral appends a literal header field without indexing: the name
// by its static-table index when idx > 0, otherwise as a string.
func hpackLiteral(b []byte, idx int, name, value string) []byte {
	b = hpackInt(b, 0x00, 4, idx)
	if idx == 0 {
		b = hpackInt(b, 0x00, 7, len(name))
		b = append(b, name...)
	}
	b = hpackInt(b, 0x00, 7, len(value))
	return append(b, value...)
}

// hpackInt appends v as an HPACK integer with an n-bit prefix (RFC 7541,
// section 5.1), the first byte's other bits from first.
func hpackInt(b []byte, first byte, n uint, v int) []byte {
	max := 1<<n - 1
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	for v -= max; v >= 128; v >>= 7 {
		b = append(b, byte(v&0x7f|0x80))
	}
	return append(b, byte(v))
}

// Close closes the connections.
func (d *h2Pool) Close() error {
	closeConns(&d.mu, d.conns, func(c *h2Conn) { c.c.Close() })
	return nil
}

// step is one call of worker i on its connection (dialled when it has
// none).
func (d *h2Pool) step(ctx context.Context) func(i int, r *Result) {
	return countedStep(ctx, func(ctx context.Context, i int) error {
		c := d.conns[i]
		if c == nil {
			var err error
			if c, err = d.dial(ctx); err != nil {
				return err
			}
			d.dials.Add(1)
			d.mu.Lock()
			d.conns[i] = c
			d.mu.Unlock()
		}
		var t0 time.Time
		tagging, stream := d.tagOn.Load(), c.next
		if tagging {
			t0 = time.Now()
		}
		err := c.roundTrip()
		if tagging && err == nil && c.port != 0 {
			d.tagged(i, c.port<<48|uint64(stream), t0)
		}
		if err != nil && !isAnswered(err) || c.done() {
			c.c.Close()
			d.mu.Lock()
			d.conns[i] = nil
			d.mu.Unlock()
		}
		return err
	})
}

// dial opens a connection and sends the client preface: SETTINGS (no
// push, a large stream window) and a WINDOW_UPDATE that opens the
// connection's window as wide. The server's SETTINGS are read with the
// first reply.
func (d *h2Pool) dial(ctx context.Context) (*h2Conn, error) {
	nc, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	nc = withRawIO(nc)
	c := &h2Conn{c: nc, r: bufio.NewReaderSize(nc, 32<<10), http: d.http, call: d.first.clone(), steady: d.steady.clone(), literal: d.literal.clone(),
		next: 1, sendWin: 65535, peerWin: 65535, buf: make([]byte, 0, 16<<10)}
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		c.port = uint64(a.Port)
	}
	c.dec = hpack.NewDecoder(4096, c.field)
	c.dec.SetMaxStringLength(h2MaxHeaderBlock)
	b := []byte(h2Preface)
	settings := []byte{0, 2, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0} // ENABLE_PUSH 0, INITIAL_WINDOW_SIZE
	binary.BigEndian.PutUint32(settings[8:], h2Window)
	b = h2Frame(b, h2Settings, 0, 0, settings)
	b = h2WindowUpdateFrame(b, 0, h2Window-65535)
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Write(b); err != nil {
		nc.Close()
		return nil, fmt.Errorf("load: %w", err)
	}
	return c, nil
}

// h2Conn is one connection and the state of its call in progress.
type h2Conn struct {
	http    bool // an HTTP reply (2xx), not a gRPC call's
	c       net.Conn
	port    uint64 // the local port (the tags' key)
	r       *bufio.Reader
	call    callFrames // the next call's frames
	steady  callFrames // the frames of the calls after the first
	literal callFrames // the frames after the server shrank its HPACK table
	next    uint32     // the next stream id
	sendWin int64      // the connection's send window
	peerWin int64      // the server's initial stream window
	recvd   int64      // DATA bytes received since the last WINDOW_UPDATE sent
	goAway  bool       // the server said GOAWAY: no call after this one
	dec     *hpack.Decoder
	head    [9]byte // a frame's header
	buf     []byte  // a frame's payload
	block   []byte  // a header block being gathered
	out     []byte  // control frames to write

	// The call in progress, as the decoder emits its header fields.
	stream      uint32
	headers     int    // header blocks seen: 1 the reply's, 2 its trailers
	httpStatus  string // :status
	contentType string
	grpcStatus  string
	grpcMessage string
	data        int64   // DATA bytes of the reply
	prefix      [5]byte // the message's length prefix
	endStream   bool    // the header block being gathered ends its stream
	blockStream uint32  // the stream of the header block being gathered
	decoding    bool    // the block being decoded is the call's
}

// done reports that the connection takes no more calls.
func (c *h2Conn) done() bool { return c.goAway || c.next > 1<<31-3 }

// roundTrip makes one call and reads its reply whole.
func (c *h2Conn) roundTrip() error {
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	need := int64(c.call.data)
	if need > c.peerWin {
		return fmt.Errorf("load: the server's stream window (%d bytes) is smaller than the request (%d)", c.peerWin, need)
	}
	for c.sendWin < need {
		if err := c.readFrame(); err != nil {
			return err
		}
	}
	c.stream = c.next
	c.next += 2
	for _, at := range c.call.ids {
		binary.BigEndian.PutUint32(c.call.b[at:], c.stream)
	}
	c.headers, c.data = 0, 0
	c.httpStatus, c.contentType, c.grpcStatus, c.grpcMessage = "", "", "", ""
	if _, err := c.c.Write(c.call.b); err != nil {
		return err
	}
	c.call = c.steady
	c.sendWin -= need
	for c.stream != 0 {
		if err := c.readFrame(); err != nil {
			return err
		}
	}
	return c.verdict()
}

// verdict checks the finished call's reply.
func (c *h2Conn) verdict() error {
	if c.http {
		st, err := strconv.Atoi(c.httpStatus)
		switch {
		case err != nil:
			return fmt.Errorf("load: an HTTP/2 reply with :status %q", c.httpStatus)
		case st < 200 || st > 299:
			return statusError(st)
		}
		return nil
	}
	if c.httpStatus != "200" {
		return grpcAnswer{what: "http status " + c.httpStatus}
	}
	if c.grpcStatus != "0" {
		if c.grpcStatus == "" {
			return errors.New("load: grpc reply without grpc-status")
		}
		return grpcAnswer{what: "grpc status " + c.grpcStatus + ": " + c.grpcMessage}
	}
	if ct := c.contentType; ct != "application/grpc" && !strings.HasPrefix(ct, "application/grpc+") && !strings.HasPrefix(ct, "application/grpc;") {
		return fmt.Errorf("load: grpc reply content-type %q", ct)
	}
	if c.data == 0 || c.prefix[0] != 0 && c.prefix[0] != 1 || int64(binary.BigEndian.Uint32(c.prefix[1:]))+5 != c.data {
		return fmt.Errorf("load: grpc reply of %d bytes is not one length-prefixed message", c.data)
	}
	return nil
}

// isAnswered reports whether err is an answer, not a transport failure
// (apart, so that a request without error does not pay for errors.As's
// target escaping).
func isAnswered(err error) bool {
	var ae answeredError
	return errors.As(err, &ae)
}

// grpcAnswer is a call the server answered with a failure: a Non2xx.
type grpcAnswer struct{ what string }

func (e grpcAnswer) Error() string { return e.what }
func (grpcAnswer) answered()       {}

// readFrame reads and handles one frame. The call in progress ends
// (c.stream becomes 0) with the END_STREAM of its reply.
func (c *h2Conn) readFrame() error {
	h := c.head[:]
	if _, err := io.ReadFull(c.r, h); err != nil {
		return err
	}
	n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	typ, flags, sid := h[3], h[4], binary.BigEndian.Uint32(h[5:])&(1<<31-1)
	if n > h2MaxPayload {
		return fmt.Errorf("load: a %d-byte HTTP/2 frame", n)
	}
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	p := c.buf[:n]
	if _, err := io.ReadFull(c.r, p); err != nil {
		return err
	}
	switch typ {
	case h2Data:
		return c.onData(flags, sid, p)
	case h2Headers, h2Continuation:
		return c.onHeaders(typ, flags, sid, p)
	case h2RSTStream:
		if sid == c.stream && len(p) == 4 {
			c.stream = 0
			return fmt.Errorf("load: the server reset the stream (HTTP/2 error %d)", binary.BigEndian.Uint32(p))
		}
	case h2Settings:
		if flags&h2Ack == 0 {
			return c.onSettings(p)
		}
	case h2Ping:
		if flags&h2Ack == 0 && len(p) == 8 {
			return c.write(h2Frame(c.out[:0], h2Ping, h2Ack, 0, p))
		}
	case h2GoAway:
		c.goAway = true
		if len(p) >= 8 && c.stream > binary.BigEndian.Uint32(p)&(1<<31-1) {
			c.stream = 0
			return fmt.Errorf("load: the server said GOAWAY (HTTP/2 error %d) before the call", binary.BigEndian.Uint32(p[4:]))
		}
	case h2WindowUpdate:
		if sid == 0 && len(p) == 4 {
			c.sendWin += int64(binary.BigEndian.Uint32(p) & (1<<31 - 1))
		}
	}
	return nil
}

func (c *h2Conn) onData(flags byte, sid uint32, p []byte) error {
	c.recvd += int64(len(p))
	if c.recvd > h2Window/2 {
		if err := c.write(h2WindowUpdateFrame(c.out[:0], 0, uint32(c.recvd))); err != nil {
			return err
		}
		c.recvd = 0
	}
	if sid != c.stream || c.stream == 0 {
		return nil
	}
	p, err := h2Unpad(flags, p)
	if err != nil {
		return err
	}
	for k := 0; k < len(p) && c.data+int64(k) < 5; k++ {
		c.prefix[c.data+int64(k)] = p[k]
	}
	c.data += int64(len(p))
	if flags&h2EndStream != 0 {
		c.stream = 0
		if !c.http {
			return errors.New("load: grpc reply without trailers")
		}
	}
	return nil
}

// onHeaders gathers a header block (HEADERS, then CONTINUATION until
// END_HEADERS) and decodes it: the reply's headers, then its trailers
// (or a trailers-only reply) with END_STREAM.
func (c *h2Conn) onHeaders(typ, flags byte, sid uint32, p []byte) error {
	if typ == h2Headers {
		var err error
		if p, err = h2Unpad(flags, p); err != nil {
			return err
		}
		if flags&h2Priority != 0 {
			if len(p) < 5 {
				return errors.New("load: a short HTTP/2 HEADERS frame")
			}
			p = p[5:]
		}
		c.block = c.block[:0]
		c.endStream = flags&h2EndStream != 0
		c.blockStream = sid
	} else if sid != c.blockStream {
		return errors.New("load: an HTTP/2 CONTINUATION frame out of place")
	}
	if len(c.block)+len(p) > h2MaxHeaderBlock {
		return fmt.Errorf("load: a reply's header block over %d bytes", h2MaxHeaderBlock)
	}
	c.block = append(c.block, p...)
	if flags&h2EndHeaders == 0 {
		return nil
	}
	// Every block goes through the decoder, whatever its stream: HPACK's
	// table is the connection's.
	mine := sid == c.stream && c.stream != 0
	c.decoding = mine
	if _, err := c.dec.Write(c.block); err != nil {
		return fmt.Errorf("load: decoding a reply's headers: %w", err)
	}
	if err := c.dec.Close(); err != nil {
		return fmt.Errorf("load: decoding a reply's headers: %w", err)
	}
	if mine {
		c.headers++
		if c.endStream {
			c.stream = 0
		}
	}
	return nil
}

// field is the HPACK decoder's callback: it keeps the fields that decide
// a call's verdict. The first block holds :status and content-type, the
// last grpc-status and grpc-message (a trailers-only reply has them all).
func (c *h2Conn) field(f hpack.HeaderField) {
	if !c.decoding {
		return
	}
	switch f.Name {
	case ":status":
		c.httpStatus = f.Value
	case "content-type":
		c.contentType = f.Value
	case "grpc-status":
		c.grpcStatus = f.Value
	case "grpc-message":
		c.grpcMessage = f.Value
	}
}

// onSettings reads the server's SETTINGS and acknowledges them.
func (c *h2Conn) onSettings(p []byte) error {
	if len(p)%6 != 0 {
		return errors.New("load: an HTTP/2 SETTINGS frame of a bad length")
	}
	for ; len(p) > 0; p = p[6:] {
		id, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:])
		switch id {
		case 0x1: // HEADER_TABLE_SIZE: the server's decoder's table
			if v < hpackTable {
				c.call, c.steady = c.literal, c.literal
			}
		case 0x4: // INITIAL_WINDOW_SIZE
			c.peerWin = int64(v)
		case 0x5: // MAX_FRAME_SIZE: the driver's frames are never larger than its least value
		}
	}
	return c.write(h2Frame(c.out[:0], h2Settings, h2Ack, 0, nil))
}

func (c *h2Conn) write(b []byte) error {
	c.out = b
	_, err := c.c.Write(b)
	return err
}

// h2Frame appends a frame.
func h2Frame(b []byte, typ, flags byte, sid uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), typ, flags, byte(sid>>24), byte(sid>>16), byte(sid>>8), byte(sid))
	return append(b, payload...)
}

// h2WindowUpdateFrame appends a WINDOW_UPDATE of inc bytes.
func h2WindowUpdateFrame(b []byte, sid, inc uint32) []byte {
	return h2Frame(b, h2WindowUpdate, 0, sid, []byte{byte(inc >> 24), byte(inc >> 16), byte(inc >> 8), byte(inc)})
}

// h2Unpad strips a PADDED frame's padding.
func h2Unpad(flags byte, p []byte) ([]byte, error) {
	if flags&h2Padded == 0 {
		return p, nil
	}
	if len(p) < 1 || int(p[0]) > len(p)-1 {
		return nil, errors.New("load: bad HTTP/2 padding")
	}
	return p[1 : len(p)-int(p[0])], nil
}
