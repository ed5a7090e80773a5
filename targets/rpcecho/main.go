// Command rpcecho is a framed-TCP echo server (see wirefmt/frame):
// it reads a request frame, checks its CRC, decodes the body and sends it
// back in a reply frame. Its switches change per-request costs by known
// amounts (targets/README.md):
//
//	-parse=copy|inplace   copy the body into a fresh buffer before decoding, or decode it in place
//	-writes=1|2           send the reply in one writev (net.Buffers) or in two writes
//	-crc=table|bytewise   the library's table-driven CRC, or a bit-by-bit loop
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"net"
	"os"

	"github.com/perfspy/perfspy/wirefmt/frame"
)

var (
	parse  = flag.String("parse", "inplace", "copy or inplace")
	writes = flag.Int("writes", 1, "1 (writev) or 2 (two writes)")
	crcAlg = flag.String("crc", "table", "table or bytewise")
)

// crcBytewise is the IEEE CRC computed bit by bit: the slow arm.
func crcBytewise(crc uint32, b []byte) uint32 {
	crc = ^crc
	for _, c := range b {
		crc ^= uint32(c)
		for i := 0; i < 8; i++ {
			if crc&1 == 1 {
				crc = crc>>1 ^ crc32.IEEE
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func checksum(header, body []byte) uint32 {
	if *crcAlg == "bytewise" {
		return crcBytewise(crcBytewise(0, header), body)
	}
	return frame.CRC(header, body)
}

// decodeCopy copies the body into a fresh buffer before decoding it.
//
//go:noinline
func decodeCopy(body []byte) []byte {
	b := make([]byte, len(body))
	copy(b, body)
	return decode(b)
}

// decode "decodes" the body: the echo needs its bytes unchanged.
//
//go:noinline
func decode(body []byte) []byte { return body }

func serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	in := make([]byte, 0, 64<<10)
	hdr := make([]byte, frame.HeaderSize)
	tail := make([]byte, 0, 64<<10)
	crcb := make([]byte, frame.CRCSize)
	for {
		in = in[:frame.HeaderSize]
		if _, err := io.ReadFull(r, in); err != nil {
			return
		}
		h, err := frame.ParseHeader(in)
		if err != nil || h.Type != frame.TypeReq {
			log.Printf("rpcecho: %v", err)
			return
		}
		n := frame.HeaderSize + int(h.Length) + frame.CRCSize
		if cap(in) < n {
			in = make([]byte, n)
		}
		in = in[:n]
		if _, err := io.ReadFull(r, in[frame.HeaderSize:]); err != nil {
			return
		}
		body := in[frame.HeaderSize : n-frame.CRCSize]
		if got, want := checksum(in[:frame.HeaderSize], body), binary.LittleEndian.Uint32(in[n-frame.CRCSize:]); got != want {
			log.Printf("rpcecho: crc %#x, frame says %#x", got, want)
			return
		}
		if *parse == "copy" {
			body = decodeCopy(body)
		} else {
			body = decode(body)
		}
		frame.Header{Type: frame.TypeReply, ID: h.ID, Length: h.Length}.Put(hdr)
		binary.LittleEndian.PutUint32(crcb, checksum(hdr, body))
		if *writes == 2 {
			if _, err := c.Write(hdr); err != nil {
				return
			}
			tail = append(append(tail[:0], body...), crcb...)
			if _, err := c.Write(tail); err != nil {
				return
			}
			continue
		}
		bufs := net.Buffers{hdr, body, crcb}
		if _, err := bufs.WriteTo(c); err != nil {
			return
		}
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	if (*parse != "copy" && *parse != "inplace") || (*writes != 1 && *writes != 2) || (*crcAlg != "table" && *crcAlg != "bytewise") {
		fmt.Fprintln(os.Stderr, "rpcecho: -parse copy|inplace, -writes 1|2, -crc table|bytewise")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "rpcecho: listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			log.Fatal(err)
		}
		go serve(c)
	}
}
