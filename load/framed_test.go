package load

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfspy/perfspy/wirefmt/frame"
)

// echoServer answers frames; corrupt flips one body byte of every reply
// (and fixes the CRC, so only the body check can catch it).
func echoServer(t *testing.T, corrupt bool) (string, *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var served atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					hdr := make([]byte, frame.HeaderSize)
					if _, err := io.ReadFull(r, hdr); err != nil {
						return
					}
					h, err := frame.ParseHeader(hdr)
					if err != nil {
						return
					}
					rest := make([]byte, int(h.Length)+frame.CRCSize)
					if _, err := io.ReadFull(r, rest); err != nil {
						return
					}
					body := rest[:h.Length]
					if corrupt {
						body[0] ^= 0xff
					}
					frame.Header{Type: frame.TypeReply, ID: h.ID, Length: h.Length}.Put(hdr)
					crc := make([]byte, 4)
					binary.LittleEndian.PutUint32(crc, frame.CRC(hdr, body))
					served.Add(1)
					c.Write(append(append(hdr, body...), crc...))
				}
			}()
		}
	}()
	return ln.Addr().String(), &served
}

func TestFramedCountsMatchServer(t *testing.T) {
	addr, served := echoServer(t, false)
	d, err := NewFramed(FramedOptions{Addr: addr, Conns: 3, BodySize: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Run(context.Background(), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	s0 := served.Load()
	r, err := d.Run(context.Background(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := served.Load() - s0; got != r.OK || r.OK == 0 || r.Errors != 0 {
		t.Errorf("driver %d OK %d errors, server answered %d", r.OK, r.Errors, got)
	}
	if r.Dials != 0 {
		t.Errorf("window dialed %d times; connections should be kept", r.Dials)
	}
}

// A reply with the right count of wrong bytes is an error, not a success.
func TestFramedChecksEveryByte(t *testing.T) {
	addr, _ := echoServer(t, true)
	d, _ := NewFramed(FramedOptions{Addr: addr, Conns: 1, BodySize: 64})
	defer d.Close()
	r, err := d.Run(context.Background(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 0 || r.Errors == 0 || !strings.Contains(r.FirstErr, "body differs") {
		t.Errorf("corrupting server: %+v", r)
	}
}

func TestFrameErrors(t *testing.T) {
	good := make([]byte, frame.HeaderSize)
	frame.Header{Type: frame.TypeReq, ID: 7, Length: 3}.Put(good)
	if h, err := frame.ParseHeader(good); err != nil || h.ID != 7 || h.Length != 3 {
		t.Fatalf("round trip: %+v %v", h, err)
	}
	bad := append([]byte(nil), good...)
	bad[0] = 0
	for _, b := range [][]byte{good[:5], bad} {
		if _, err := frame.ParseHeader(b); !errors.Is(err, frame.ErrBadFrame) {
			t.Errorf("ParseHeader(%x): %v", b, err)
		}
	}
	if _, err := NewFramed(FramedOptions{}); err == nil {
		t.Error("no address: no error")
	}
}

func FuzzParseHeader(f *testing.F) {
	good := make([]byte, frame.HeaderSize)
	frame.Header{Type: frame.TypeReq, ID: 1, Length: 10}.Put(good)
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := frame.ParseHeader(b)
		if err != nil {
			return
		}
		out := make([]byte, frame.HeaderSize)
		h.Put(out)
		if h2, err := frame.ParseHeader(out); err != nil || h2 != h {
			t.Fatalf("round trip of %+v: %+v %v", h, h2, err)
		}
	})
}

// TestFramedNoAllocations: a framed request allocates nothing in the
// steady state: the driver's cost per request is the kernel's, as the
// server's is (both write a frame and read one).
func TestFramedNoAllocations(t *testing.T) {
	addr := acceptOne(t, func(c net.Conn) {
		buf := make([]byte, frame.HeaderSize+64+frame.CRCSize)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			h, _ := frame.ParseHeader(buf)
			h.Type = frame.TypeReply
			h.Put(buf)
			n := len(buf)
			binary.LittleEndian.PutUint32(buf[n-frame.CRCSize:], frame.CRC(buf[:frame.HeaderSize], buf[frame.HeaderSize:n-frame.CRCSize]))
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	d, err := NewFramed(FramedOptions{Addr: addr, Conns: 1, BodySize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res := &Result{Latency: newHistogram()}
	step := d.step(context.Background())
	step(0, res) // dial
	allocs := testing.AllocsPerRun(2000, func() { step(0, res) })
	if allocs != 0 || res.OK != 2002 {
		t.Errorf("%.2f allocations per request, %d successes of 2002 (%s)", allocs, res.OK, res.FirstErr)
	}
}

// acceptOne listens on a loopback port, serves the first connection
// with serve (closing it after) and returns the address; the listener
// closes with the test.
func acceptOne(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	return ln.Addr().String()
}
