package load

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"

	"github.com/perfspy/perfspy/wirefmt/bulk"
)

// QUICOptions configures a QUIC bulk-transfer driver. Zero fields get
// defaults.
type QUICOptions struct {
	Addr    string
	Conns   int   // QUIC connections; default 1
	Streams int   // concurrent streams per connection; default 1
	Size    int64 // bytes per transfer; default 1 MiB
}

// QUIC drives targets/quicecho: a request is one whole transfer of Size
// bytes of the bulk pattern on a new stream. A push succeeds when the
// server's reply says it read every byte right; an echo when every byte
// that comes back is the one sent. Datagrams are counted at the client
// from quic-go's qlog events of 1-RTT packets, one packet per datagram
// once the handshake is done: those the client sent are those the server
// received, and the other way round.
type QUIC struct {
	opt    QUICOptions
	mu     sync.Mutex
	conns  []*quic.Conn // kept across phases
	counts bulkCounts
	bufs   sync.Pool
}

// NewQUIC returns a driver for opt.
func NewQUIC(opt QUICOptions) (*QUIC, error) {
	if opt.Addr == "" {
		return nil, errors.New("load: no address")
	}
	if opt.Conns <= 0 {
		opt.Conns = 1
	}
	if opt.Streams <= 0 {
		opt.Streams = 1
	}
	if opt.Size == 0 {
		opt.Size = 1 << 20
	}
	if err := checkSize(opt.Size); err != nil {
		return nil, err
	}
	d := &QUIC{opt: opt, conns: make([]*quic.Conn, opt.Conns)}
	d.counts.source = "client-qlog-1rtt-packets"
	d.bufs.New = func() any { b := make([]byte, 64<<10); return &b }
	return d, nil
}

// Close closes the connections.
func (d *QUIC) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, c := range d.conns {
		if c != nil {
			c.CloseWithError(0, "done")
			d.conns[i] = nil
		}
	}
	return nil
}

// counter is the qlog trace that counts 1-RTT datagrams.
type counter struct{ c *bulkCounts }

func (t counter) AddProducer() qlogwriter.Recorder { return t }
func (t counter) SupportsSchemas(string) bool      { return true }
func (t counter) Close() error                     { return nil }

func (t counter) RecordEvent(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.PacketSent:
		if e.Header.PacketType == qlog.PacketType1RTT {
			t.c.count(e.Raw.Length)
		}
	case qlog.PacketReceived:
		if e.Header.PacketType == qlog.PacketType1RTT {
			t.c.count(e.Raw.Length)
		}
	}
}

func (d *QUIC) conn(ctx context.Context, i int) (*quic.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.conns[i]; c != nil && c.Context().Err() == nil {
		return c, nil
	}
	tc := &tls.Config{NextProtos: []string{bulk.ALPN}, MinVersion: tls.VersionTLS13,
		// The target makes its certificate at start; the driver reaches
		// it on 127.0.0.1 only.
		InsecureSkipVerify: true}
	qc := &quic.Config{MaxIdleTimeout: time.Minute, KeepAlivePeriod: 10 * time.Second,
		Tracer: func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return counter{&d.counts} }}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := quic.DialAddr(dctx, d.opt.Addr, tc, qc)
	if err != nil {
		return nil, err
	}
	d.counts.dials.Add(1)
	d.conns[i] = c
	return c, nil
}

// transfer sends one transfer on a new stream of worker i's connection
// and checks what comes back.
func (d *QUIC) transfer(ctx context.Context, i int) error {
	c, err := d.conn(ctx, i/d.opt.Streams)
	if err != nil {
		return err
	}
	st, err := c.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	st.SetDeadline(time.Now().Add(30 * time.Second))
	werr := make(chan error, 1)
	go func() {
		// Written while the reply is read: an echo fills the flow-control
		// windows otherwise.
		bp := d.bufs.Get().(*[]byte)
		defer d.bufs.Put(bp)
		buf := *bp
		var off int64
		for off < d.opt.Size {
			n := int(min(int64(len(buf)), d.opt.Size-off))
			bulk.Fill(buf[:n], off)
			if _, err := st.Write(buf[:n]); err != nil {
				werr <- err
				return
			}
			off += int64(n)
		}
		werr <- st.Close()
	}()
	bp := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(bp)
	chk := newEchoChecker(d.opt.Size)
	var rerr error
	for {
		n, err := st.Read(*bp)
		chk.add((*bp)[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	if err := <-werr; err != nil {
		st.CancelRead(1)
		return err
	}
	if rerr != nil {
		st.CancelWrite(1)
		return rerr
	}
	return chk.done()
}

// Run implements Driver.
func (d *QUIC) Run(ctx context.Context, dur time.Duration) (*Result, error) {
	return d.counts.phaseCounts(func() (*Result, error) {
		return phase(ctx, dur, d.opt.Conns*d.opt.Streams, countedStep(ctx, d.transfer))
	})
}

// RunN implements Driver.
func (d *QUIC) RunN(ctx context.Context, n int) (*Result, error) {
	return d.counts.phaseCounts(func() (*Result, error) {
		return phaseN(ctx, n, d.opt.Conns*d.opt.Streams, countedStep(ctx, d.transfer))
	})
}
