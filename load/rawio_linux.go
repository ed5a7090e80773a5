package load

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a plain TCP connection with raw system calls
// on its non-blocking descriptor, waiting in the netpoller when one
// would block, as net.Conn's Read and Write do, but without telling the
// scheduler that the goroutine entered a system call. A call on a
// non-blocking socket never blocks, and the scheduler's bookkeeping is
// what made the lean driver cost more than its lightest server: on the
// driver's one core, sysmon took the P from a goroutine in write or read
// (a runnable goroutine was waiting) and handed it to another thread,
// and the first, back from the call, parked on a futex: 29% of the
// driver's CPU was sysmon alone, and about as much again the futex,
// sched_yield and context switches of the threads it woke (perf,
// targets/floor, 2026-12-04).
type rawIO struct {
	net.Conn
	rc syscall.RawConn
	// The callbacks, made once, and their arguments and results live
	// here, so that a request allocates nothing: one read at a time and
	// one write at a time, as for net.Conn's own buffers.
	rd, wr rawCall
}

// rawCall is one direction's call: its callback, its buffer, what it
// did and the error it met.
type rawCall struct {
	fn    func(fd uintptr) bool
	p     []byte
	n     int
	errno syscall.Errno
}

// withRawIO wraps c in rawIO when it is a TCP connection; TLS and other
// connections are returned as they are, and every connection under the
// race detector (race_on.go).
func withRawIO(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok || raceEnabled {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawIO{Conn: c, rc: rc}
	r.rd.fn, r.wr.fn = r.read, r.write
	return r
}

// read is one read(2) of r.p: false when it would block, so that
// RawConn.Read waits for the descriptor to be readable and calls again.
func (r *rawIO) read(fd uintptr) bool {
	c := &r.rd
	v, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.p[0])), uintptr(len(c.p)))
	if e == syscall.EAGAIN {
		return false
	}
	c.n, c.errno = int(v), e
	return e != syscall.EINTR
}

// write writes the rest of r.wr.p with write(2) until all of it is
// written: false when the send buffer is full, to wait for room.
func (r *rawIO) write(fd uintptr) bool {
	c := &r.wr
	for c.n < len(c.p) {
		v, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.p[c.n])), uintptr(len(c.p)-c.n))
		switch e {
		case 0:
			c.n += int(v)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.errno = e
			return true
		}
	}
	return true
}

func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c := &r.rd
	c.p, c.n, c.errno = p, 0, 0
	err := r.rc.Read(c.fn)
	n, errno := c.n, c.errno
	c.p = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, r.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawIO) Write(p []byte) (int, error) {
	c := &r.wr
	c.p, c.n, c.errno = p, 0, 0
	err := r.rc.Write(c.fn)
	n, errno := c.n, c.errno
	c.p = nil
	if err == nil && errno != 0 {
		err = r.opError("write", errno)
	}
	return n, err
}

// opError is an error as net.Conn's methods return it.
func (r *rawIO) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: r.LocalAddr(), Addr: r.RemoteAddr(), Err: errno}
}
