// Package frame is the framed protocol of targets/rpcecho, shared by the
// server and probe's load driver.
//
// A frame is an 18-byte header, the body, and a CRC32 (IEEE) over the
// header and the body, little-endian:
//
//	magic   uint16  0x5045 ("PE")
//	version uint8   1
//	type    uint8   1 request, 2 reply
//	flags   uint16  0
//	id      uint64  request id, echoed in the reply
//	length  uint32  body length
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Header fields.
const (
	HeaderSize = 18
	CRCSize    = 4
	Magic      = 0x5045
	Version    = 1
	TypeReq    = 1
	TypeReply  = 2
	MaxBody    = 16 << 20
)

// Header is a decoded header.
type Header struct {
	Type   uint8
	Flags  uint16
	ID     uint64
	Length uint32
}

// Put writes h into b[:HeaderSize].
func (h Header) Put(b []byte) {
	binary.LittleEndian.PutUint16(b[0:], Magic)
	b[2] = Version
	b[3] = h.Type
	binary.LittleEndian.PutUint16(b[4:], h.Flags)
	binary.LittleEndian.PutUint64(b[6:], h.ID)
	binary.LittleEndian.PutUint32(b[14:], h.Length)
}

// ErrBadFrame is wrapped by every decoding error.
var ErrBadFrame = errors.New("bad frame")

// ParseHeader decodes b[:HeaderSize].
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: short header (%d bytes)", ErrBadFrame, len(b))
	}
	if m := binary.LittleEndian.Uint16(b[0:]); m != Magic {
		return Header{}, fmt.Errorf("%w: magic %#x", ErrBadFrame, m)
	}
	if b[2] != Version {
		return Header{}, fmt.Errorf("%w: version %d", ErrBadFrame, b[2])
	}
	h := Header{Type: b[3], Flags: binary.LittleEndian.Uint16(b[4:]), ID: binary.LittleEndian.Uint64(b[6:]), Length: binary.LittleEndian.Uint32(b[14:])}
	if h.Length > MaxBody {
		return Header{}, fmt.Errorf("%w: body length %d over %d", ErrBadFrame, h.Length, MaxBody)
	}
	return h, nil
}

// CRC is the frame's checksum over header and body.
func CRC(header, body []byte) uint32 {
	c := crc32.ChecksumIEEE(header)
	return crc32.Update(c, crc32.IEEETable, body)
}
