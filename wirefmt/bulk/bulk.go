// Package bulk is the wire contract of the bulk-transfer targets,
// targets/quicecho and targets/udpfloor, and of their load drivers: the
// byte pattern every transfer carries, the reply that ends a push, and the
// header of a floor datagram.
//
// Every byte of a transfer is a function of its offset, so a receiver
// checks each byte without a copy of what was sent, and a chunk delivered
// at the wrong offset fails the check: a count is not enough, since a
// broken send queue can deliver the right number of wrong bytes.
package bulk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// ALPN is the TLS application protocol of targets/quicecho.
const ALPN = "perfspy-bulk"

// Modes of the bulk targets: push (the client writes, the server reads)
// and echo (the server writes back what it reads).
const (
	ModePush = "push"
	ModeEcho = "echo"
)

// word is the pattern's 8 bytes at offset 8*w: w+1 times an odd
// constant, a bijection, so that no two words of a transfer (up to 2^64
// words) are equal, at one multiply per 8 bytes: the check is not what a
// window measures.
func word(w uint64) uint64 {
	return (w + 1) * 0x9e3779b97f4a7c15
}

// At is the pattern's byte at offset off.
func At(off int64) byte {
	return byte(word(uint64(off)>>3) >> (8 * (uint64(off) & 7)))
}

// Fill writes the pattern of offsets off to off+len(b) into b.
func Fill(b []byte, off int64) {
	i := 0
	for ; i < len(b) && (off+int64(i))&7 != 0; i++ {
		b[i] = At(off + int64(i))
	}
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], word(uint64(off+int64(i))>>3))
	}
	for ; i < len(b); i++ {
		b[i] = At(off + int64(i))
	}
}

// Check returns the offset of the first byte of b that is not the
// pattern at offsets off onwards, or -1.
func Check(b []byte, off int64) int64 {
	i := 0
	for ; i < len(b) && (off+int64(i))&7 != 0; i++ {
		if b[i] != At(off+int64(i)) {
			return off + int64(i)
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != word(uint64(off+int64(i))>>3) {
			for j := i; ; j++ {
				if b[j] != At(off+int64(j)) {
					return off + int64(j)
				}
			}
		}
	}
	for ; i < len(b); i++ {
		if b[i] != At(off+int64(i)) {
			return off + int64(i)
		}
	}
	return -1
}

// ReplySize is the size of a push's reply.
const ReplySize = 16

// Reply ends a push: the bytes the server read and the offset of the first
// byte that was not the pattern (-1: none).
type Reply struct {
	Received int64
	BadAt    int64
}

// Append appends r's wire form: two little-endian int64s.
func (r Reply) Append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Received))
	return binary.LittleEndian.AppendUint64(b, uint64(r.BadAt))
}

// ParseReply reads a reply.
func ParseReply(b []byte) (Reply, error) {
	if len(b) != ReplySize {
		return Reply{}, fmt.Errorf("bulk: reply of %d bytes, want %d", len(b), ReplySize)
	}
	return Reply{Received: int64(binary.LittleEndian.Uint64(b)), BadAt: int64(binary.LittleEndian.Uint64(b[8:]))}, nil
}

// Check tells a correct reply to a push of size bytes from a wrong one.
func (r Reply) Check(size int64) error {
	switch {
	case r.BadAt >= 0:
		return fmt.Errorf("bulk: the server read a wrong byte at offset %d", r.BadAt)
	case r.Received != size:
		return fmt.Errorf("bulk: the server read %d bytes of %d", r.Received, size)
	}
	return nil
}

// HeaderSize is the size of a floor datagram's header.
const HeaderSize = 16

// Header heads every datagram of targets/udpfloor: the transfer, the size
// of its datagrams (the last may be shorter), the datagram's place in it
// and the transfer's count of datagrams. A push's reply is one header
// whose Seq is the count received and whose Count is 0 when every payload
// was the pattern (1 otherwise).
type Header struct {
	Transfer uint32
	Pkt      uint32
	Seq      uint32
	Count    uint32
}

// Put writes h into b's first HeaderSize bytes.
func (h Header) Put(b []byte) {
	binary.LittleEndian.PutUint32(b, h.Transfer)
	binary.LittleEndian.PutUint32(b[4:], h.Pkt)
	binary.LittleEndian.PutUint32(b[8:], h.Seq)
	binary.LittleEndian.PutUint32(b[12:], h.Count)
}

// ErrShort is returned for a datagram shorter than a header.
var ErrShort = errors.New("bulk: datagram shorter than its header")

// ParseHeader reads the header of a datagram.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	return Header{Transfer: binary.LittleEndian.Uint32(b), Pkt: binary.LittleEndian.Uint32(b[4:]), Seq: binary.LittleEndian.Uint32(b[8:]), Count: binary.LittleEndian.Uint32(b[12:])}, nil
}

// Offset is the transfer offset of the datagram's payload.
func (h Header) Offset() int64 {
	return int64(h.Seq) * (int64(h.Pkt) - HeaderSize)
}

// Datagrams is the count of pkt-byte datagrams that carry size bytes.
func Datagrams(size int64, pkt int) uint32 {
	per := int64(pkt - HeaderSize)
	return uint32((size + per - 1) / per)
}

// SetBuffers sets a UDP socket's receive and send buffers to n bytes,
// forcing past the system's maximum where the process may (Linux), as
// quic-go does for its own sockets.
func SetBuffers(c *net.UDPConn, n int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) { serr = setBuffers(int(fd), n) })
	if err != nil {
		return err
	}
	return serr
}
