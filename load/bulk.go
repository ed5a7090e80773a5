package load

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/perfspy/perfspy/wirefmt/bulk"
)

// bulkCounts are a bulk driver's datagram counters, read around a phase.
type bulkCounts struct {
	dials, datagrams, bytes atomic.Int64
	largest                 atomic.Int64 // since the driver started
	source                  string       // how datagrams are counted
}

func (c *bulkCounts) count(n int) {
	c.datagrams.Add(1)
	c.bytes.Add(int64(n))
	for {
		m := c.largest.Load()
		if int64(n) <= m || c.largest.CompareAndSwap(m, int64(n)) {
			return
		}
	}
}

// phaseCounts runs a phase and sets the result's dials and datagrams to
// the counters' change over it.
func (c *bulkCounts) phaseCounts(run func() (*Result, error)) (*Result, error) {
	d0, g0, b0 := c.dials.Load(), c.datagrams.Load(), c.bytes.Load()
	res, err := run()
	if res != nil {
		res.Dials = c.dials.Load() - d0
		res.Datagrams = c.datagrams.Load() - g0
		res.DatagramBytes = c.bytes.Load() - b0
		res.MaxDatagram = c.largest.Load()
		res.DatagramSource = c.source
	}
	return res, err
}

// ErrBadTransfer is returned for a transfer whose bytes came back wrong.
var ErrBadTransfer = errors.New("bad transfer")

// checkSize validates a transfer size.
func checkSize(size int64) error {
	if size <= 0 || size > 1<<30 {
		return fmt.Errorf("load: transfer size %d: want 1 byte to 1 GiB", size)
	}
	return nil
}

// echoChecker checks a transfer's echo as it arrives, or, when it is a
// push's reply instead, keeps its first bytes.
type echoChecker struct {
	size  int64
	got   int64
	badAt int64
	head  [bulk.ReplySize]byte
}

func newEchoChecker(size int64) *echoChecker { return &echoChecker{size: size, badAt: -1} }

func (c *echoChecker) add(b []byte) {
	if c.got < bulk.ReplySize {
		copy(c.head[c.got:], b)
	}
	if c.badAt < 0 {
		c.badAt = bulk.Check(b, c.got)
	}
	c.got += int64(len(b))
}

// done judges the whole response: the echo of the transfer, or a push's
// reply that says every byte arrived right.
func (c *echoChecker) done() error {
	if c.got == c.size && c.badAt < 0 {
		return nil // echo
	}
	if c.got == bulk.ReplySize {
		r, err := bulk.ParseReply(c.head[:])
		if err != nil {
			return err
		}
		if err := r.Check(c.size); err != nil {
			return fmt.Errorf("%w: %v", ErrBadTransfer, err)
		}
		return nil
	}
	if c.badAt >= 0 {
		return fmt.Errorf("%w: echo byte %d is not what was sent", ErrBadTransfer, c.badAt)
	}
	return fmt.Errorf("%w: %d bytes back for a transfer of %d (neither its echo nor a push's reply)", ErrBadTransfer, c.got, c.size)
}
