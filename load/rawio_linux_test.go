package load

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestRawIO: a TCP connection the drivers dial reads and writes with raw
// system calls (none under -race), whole across a full send buffer, with
// io.EOF at the peer's close and the deadline's error past it.
func TestRawIO(t *testing.T) {
	addr := acceptOne(t, func(c net.Conn) {
		io.Copy(c, c) // echo until the client half-closes, then close
	})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := withRawIO(nc)
	defer c.Close()
	if _, raw := c.(*rawIO); raw == raceEnabled {
		t.Fatalf("withRawIO gave %T with raceEnabled %v", c, raceEnabled)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// 4 MiB: more than the socket buffers hold, so that write waits for
	// room while the echo is read.
	want := bytes.Repeat([]byte("0123456789abcdef"), 256<<10)
	errc := make(chan error, 1)
	go func() {
		n, err := c.Write(want)
		if err == nil && n != len(want) {
			err = errors.New("short write")
		}
		nc.(*net.TCPConn).CloseWrite()
		errc <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, want the %d written", len(got), len(want))
	}
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Errorf("after the peer's close: %d, %v; want 0, io.EOF", n, err)
	}
	// A deadline passed: the netpoller's error, as net.Conn gives it.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := withRawIO(c2)
	defer r.Close()
	r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past its deadline: %v", err)
	}
}
