package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perfspy/perfspy/wirefmt/frame"
)

// FramedOptions configures a framed-TCP driver. Zero fields get defaults.
type FramedOptions struct {
	Addr     string
	Conns    int // default 8
	BodySize int // default 1024
}

// Framed drives targets/rpcecho's protocol: each worker keeps one
// connection and sends one request frame at a time. A success is a reply
// whose CRC is right and whose body equals the request's, byte for byte.
type Framed struct {
	opt   FramedOptions
	mu    sync.Mutex
	conns []*framedConn // one per worker, kept across phases
	workers
	id atomic.Uint64
}

type framedConn struct {
	c    net.Conn
	r    *bufio.Reader
	req  []byte
	resp []byte
	body []byte
}

// NewFramed returns a driver for opt.
func NewFramed(opt FramedOptions) (*Framed, error) {
	if opt.Addr == "" {
		return nil, errors.New("load: no address")
	}
	if opt.Conns <= 0 {
		opt.Conns = 8
	}
	if opt.BodySize <= 0 {
		opt.BodySize = 1024
	}
	if opt.BodySize > frame.MaxBody {
		return nil, fmt.Errorf("load: body size %d over %d", opt.BodySize, frame.MaxBody)
	}
	d := &Framed{opt: opt, conns: make([]*framedConn, opt.Conns)}
	d.workers.n, d.workers.step = opt.Conns, d.step
	d.workers.abort = func() { d.Close() }
	return d, nil
}

// Close closes the connections.
func (d *Framed) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, fc := range d.conns {
		if fc != nil {
			fc.c.Close()
			d.conns[i] = nil
		}
	}
	return nil
}

func (d *Framed) conn(ctx context.Context, i int) (*framedConn, error) {
	d.mu.Lock()
	fc := d.conns[i]
	d.mu.Unlock()
	if fc != nil {
		return fc, nil
	}
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", d.opt.Addr)
	if err != nil {
		return nil, err
	}
	c = withRawIO(c)
	d.dials.Add(1)
	rng := rand.New(rand.NewSource(int64(i) + 1))
	fc = &framedConn{c: c, r: bufio.NewReaderSize(c, 64<<10), body: make([]byte, d.opt.BodySize)}
	rng.Read(fc.body)
	n := frame.HeaderSize + d.opt.BodySize + frame.CRCSize
	fc.req, fc.resp = make([]byte, n), make([]byte, n)
	copy(fc.req[frame.HeaderSize:], fc.body)
	d.mu.Lock()
	d.conns[i] = fc
	d.mu.Unlock()
	return fc, nil
}

func (d *Framed) drop(i int) {
	d.mu.Lock()
	if fc := d.conns[i]; fc != nil {
		fc.c.Close()
		d.conns[i] = nil
	}
	d.mu.Unlock()
}

// one sends a request and checks the reply.
func (d *Framed) one(fc *framedConn) error {
	id := d.id.Add(1)
	n := len(fc.req)
	frame.Header{Type: frame.TypeReq, ID: id, Length: uint32(d.opt.BodySize)}.Put(fc.req)
	binary.LittleEndian.PutUint32(fc.req[n-frame.CRCSize:], frame.CRC(fc.req[:frame.HeaderSize], fc.req[frame.HeaderSize:n-frame.CRCSize]))
	fc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fc.c.Write(fc.req); err != nil {
		return err
	}
	if _, err := io.ReadFull(fc.r, fc.resp[:frame.HeaderSize]); err != nil {
		return err
	}
	h, err := frame.ParseHeader(fc.resp)
	if err != nil {
		return err
	}
	if h.Type != frame.TypeReply || h.ID != id || int(h.Length) != d.opt.BodySize {
		return fmt.Errorf("%w: reply type %d id %d length %d to request %d of %d bytes", frame.ErrBadFrame, h.Type, h.ID, h.Length, id, d.opt.BodySize)
	}
	if _, err := io.ReadFull(fc.r, fc.resp[frame.HeaderSize:]); err != nil {
		return err
	}
	body := fc.resp[frame.HeaderSize : n-frame.CRCSize]
	if got, want := frame.CRC(fc.resp[:frame.HeaderSize], body), binary.LittleEndian.Uint32(fc.resp[n-frame.CRCSize:]); got != want {
		return fmt.Errorf("%w: reply crc %#x, frame says %#x", frame.ErrBadFrame, got, want)
	}
	if !bytes.Equal(body, fc.body) {
		return fmt.Errorf("%w: reply body differs from the request's", frame.ErrBadFrame)
	}
	return nil
}

// step sends one request on worker i's connection.
func (d *Framed) step(ctx context.Context) func(i int, r *Result) {
	return countedStep(ctx, func(ctx context.Context, i int) error {
		fc, err := d.conn(ctx, i)
		if err != nil {
			return err
		}
		if err := d.one(fc); err != nil {
			d.drop(i) // a broken stream cannot be resynchronized
			return err
		}
		return nil
	})
}

// AnswersFramed tells whether addr answers one request frame of the
// framed protocol (targets/rpcecho's) with its reply within a second:
// -proto auto's test for a TCP server that answers neither HTTP/1.1 nor
// gRPC reflection.
func AnswersFramed(ctx context.Context, addr string) bool {
	c, err := dialFor(ctx, "tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	req := make([]byte, frame.HeaderSize+frame.CRCSize)
	frame.Header{Type: frame.TypeReq, ID: 1}.Put(req)
	binary.LittleEndian.PutUint32(req[frame.HeaderSize:], frame.CRC(req[:frame.HeaderSize], nil))
	if _, err := c.Write(req); err != nil {
		return false
	}
	resp := make([]byte, frame.HeaderSize)
	if _, err := io.ReadFull(c, resp); err != nil {
		return false
	}
	h, err := frame.ParseHeader(resp)
	return err == nil && h.Type == frame.TypeReply && h.ID == 1
}
