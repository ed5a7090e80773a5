package load

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/perfspy/perfspy/wirefmt/bulk"
)

// UDPOptions configures the driver of targets/udpfloor. Zero fields get
// defaults.
type UDPOptions struct {
	Addr  string
	Conns int   // sockets, one transfer at a time each; default 1
	Size  int64 // bytes per transfer; default 1 MiB
	Pkt   int   // datagram size; default 1252
}

// UDP drives targets/udpfloor: a request is one transfer of Size bytes in
// datagrams of Pkt bytes, each headed by a bulk.Header. A push succeeds
// when the server's one-datagram reply says every datagram arrived with
// the pattern; an echo when every datagram comes back with it. A lost
// datagram fails its transfer after a second. Every datagram sent and
// received is counted.
type UDP struct {
	opt    UDPOptions
	mu     sync.Mutex
	socks  []*udpSock
	counts bulkCounts
	id     atomic.Uint32
	noGSO  bool // tests: sendmmsg, as on a kernel without UDP GSO
}

type udpSock struct {
	c  *net.UDPConn
	pc *ipv4.PacketConn
	in []byte
	// msgs are a transfer's datagrams, built once: the pattern depends
	// on the offset only, so a transfer rewrites their headers alone.
	msgs []ipv4.Message
	// gso is the datagrams back to back in one buffer, sent gsoBatch at
	// a time with UDP generic segmentation offload; nil when the kernel
	// refused the socket option (sendmmsg then).
	gso []byte
}

// The driver must cost less per datagram than the server's one recvfrom
// each: on loopback the sender also pays for the delivery. With UDP GSO
// one send of up to 64 KB is cut into datagrams by the kernel, which the
// server still reads one at a time (its socket does not ask for GRO).
const (
	sendBatch = 64    // datagrams per sendmmsg
	gsoBytes  = 65000 // at most per GSO send, under the 64 KB of an IP packet
)

// NewUDP returns a driver for opt.
func NewUDP(opt UDPOptions) (*UDP, error) {
	if opt.Addr == "" {
		return nil, errors.New("load: no address")
	}
	if opt.Conns <= 0 {
		opt.Conns = 1
	}
	if opt.Size == 0 {
		opt.Size = 1 << 20
	}
	if opt.Pkt == 0 {
		opt.Pkt = 1252
	}
	if err := checkSize(opt.Size); err != nil {
		return nil, err
	}
	if opt.Pkt <= bulk.HeaderSize || opt.Pkt > 65507 {
		return nil, fmt.Errorf("load: datagram size %d: want %d to 65507", opt.Pkt, bulk.HeaderSize+1)
	}
	d := &UDP{opt: opt, socks: make([]*udpSock, opt.Conns)}
	d.counts.source = "client-socket"
	return d, nil
}

// Close closes the sockets.
func (d *UDP) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, s := range d.socks {
		if s != nil {
			s.c.Close()
			d.socks[i] = nil
		}
	}
	return nil
}

func (d *UDP) sock(i int) (*udpSock, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.socks[i]; s != nil {
		return s, nil
	}
	ra, err := net.ResolveUDPAddr("udp", d.opt.Addr)
	if err != nil {
		return nil, err
	}
	c, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		return nil, err
	}
	// A whole transfer's echo waits in the receive buffer.
	if err := bulk.SetBuffers(c, max(7<<20, 2*int(d.opt.Size))); err != nil {
		c.Close()
		return nil, err
	}
	d.counts.dials.Add(1)
	s := &udpSock{c: c, pc: ipv4.NewPacketConn(c), in: make([]byte, 64<<10)}
	count := bulk.Datagrams(d.opt.Size, d.opt.Pkt)
	per := int64(d.opt.Pkt - bulk.HeaderSize)
	s.msgs = make([]ipv4.Message, count)
	all := make([]byte, 0, int(count)*d.opt.Pkt)
	for seq := range count {
		h := bulk.Header{Pkt: uint32(d.opt.Pkt), Seq: seq, Count: count}
		n := bulk.HeaderSize + int(min(per, d.opt.Size-h.Offset()))
		all = all[:len(all)+n]
		b := all[len(all)-n:]
		bulk.Fill(b[bulk.HeaderSize:], h.Offset())
		s.msgs[seq].Buffers = [][]byte{b}
	}
	if !d.noGSO && d.opt.Pkt <= gsoBytes/2 && setGSO(c, d.opt.Pkt) == nil {
		s.gso = all
	}
	d.socks[i] = s
	return s, nil
}

// setGSO sets UDP_SEGMENT on c: sends are cut into datagrams of size bytes
// (Linux only: elsewhere every datagram is sent on its own).
func setGSO(c *net.UDPConn, size int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setSegment(int(fd), size) }); err != nil {
		return err
	}
	return serr
}

// send sends transfer id's datagrams, sendBatch at a time.
func (d *UDP) send(s *udpSock, id uint32) error {
	count := uint32(len(s.msgs))
	for seq, m := range s.msgs {
		bulk.Header{Transfer: id, Pkt: uint32(d.opt.Pkt), Seq: uint32(seq), Count: count}.Put(m.Buffers[0])
	}
	if s.gso != nil {
		return d.sendGSO(s)
	}
	for off := 0; off < len(s.msgs); {
		n, err := s.pc.WriteBatch(s.msgs[off:min(off+sendBatch, len(s.msgs))], 0)
		if err != nil {
			return err
		}
		for _, m := range s.msgs[off : off+n] {
			d.counts.count(len(m.Buffers[0]))
		}
		off += n
	}
	return nil
}

// sendGSO sends the transfer's datagrams in sends of up to gsoBytes.
func (d *UDP) sendGSO(s *udpSock) error {
	per := gsoBytes / d.opt.Pkt * d.opt.Pkt
	for off := 0; off < len(s.gso); off += per {
		b := s.gso[off:min(off+per, len(s.gso))]
		if _, err := s.c.Write(b); err != nil {
			return err
		}
	}
	for _, m := range s.msgs {
		d.counts.count(len(m.Buffers[0]))
	}
	return nil
}

// transfer sends one transfer from worker i's socket and checks the
// reply or the echo.
func (d *UDP) transfer(ctx context.Context, i int) error {
	s, err := d.sock(i)
	if err != nil {
		return err
	}
	count := bulk.Datagrams(d.opt.Size, d.opt.Pkt)
	id := d.id.Add(1)
	per := int64(d.opt.Pkt - bulk.HeaderSize)
	if err := d.send(s, id); err != nil {
		return err
	}
	got := make(map[uint32]bool, count)
	deadline := time.Now().Add(time.Second)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.c.SetReadDeadline(deadline)
		n, err := s.c.Read(s.in)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return fmt.Errorf("udp transfer %d: %d of %d datagrams back within a second (lost)", id, len(got), count)
			}
			return err
		}
		d.counts.count(n)
		h, err := bulk.ParseHeader(s.in[:n])
		if err != nil || h.Transfer != id {
			continue // a late datagram of a transfer that failed
		}
		if n == bulk.HeaderSize { // a push's reply
			if h.Count != 0 || h.Seq != count {
				return fmt.Errorf("%w: the server read %d of %d datagrams, status %d", ErrBadTransfer, h.Seq, count, h.Count)
			}
			return nil
		}
		if h.Seq >= count || h.Pkt != uint32(d.opt.Pkt) || int64(n-bulk.HeaderSize) != min(per, d.opt.Size-h.Offset()) ||
			bulk.Check(s.in[bulk.HeaderSize:n], h.Offset()) >= 0 {
			return fmt.Errorf("%w: echoed datagram %d of transfer %d is not what was sent", ErrBadTransfer, h.Seq, id)
		}
		got[h.Seq] = true
		if uint32(len(got)) == count {
			return nil
		}
	}
}

// Run implements Driver.
func (d *UDP) Run(ctx context.Context, dur time.Duration) (*Result, error) {
	return d.counts.phaseCounts(func() (*Result, error) {
		return phase(ctx, dur, d.opt.Conns, countedStep(ctx, d.transfer))
	})
}

// RunN implements Driver.
func (d *UDP) RunN(ctx context.Context, n int) (*Result, error) {
	return d.counts.phaseCounts(func() (*Result, error) {
		return phaseN(ctx, n, d.opt.Conns, countedStep(ctx, d.transfer))
	})
}

// AnswersBulkUDP tells whether addr answers a one-datagram transfer of
// the bulk protocol (targets/udpfloor's, pushed or echoed) within half a
// second: -proto auto's test for a UDP target (one that does not is
// driven as QUIC).
func AnswersBulkUDP(ctx context.Context, addr string) bool {
	c, err := dialFor(ctx, "udp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	const pkt = bulk.HeaderSize + 64
	b := make([]byte, pkt)
	bulk.Header{Transfer: rand.Uint32(), Pkt: pkt, Seq: 0, Count: 1}.Put(b)
	bulk.Fill(b[bulk.HeaderSize:], 0)
	if _, err := c.Write(b); err != nil {
		return false
	}
	in := make([]byte, 2048)
	n, err := c.Read(in)
	return err == nil && n >= bulk.HeaderSize
}
