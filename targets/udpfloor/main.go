// Command udpfloor is the kernel's floor under targets/quicecho: plain UDP
// sockets, one system call per datagram, no transport protocol. A transfer
// is Count datagrams of the same size, each headed by a wirefmt/bulk
// Header and carrying the pattern.
//
//	-mode=push   the server reads a transfer's datagrams, checks every
//	             payload byte, and replies with one header datagram when it
//	             has them all
//	-mode=echo   the server sends every datagram back as it came
//
// -corrupt-at N flips the byte at offset N of every transfer: the drivers'
// tests check that they notice.
//
// -sockbuf N sets the receive and send buffers (default 7 MiB, the size
// quic-go asks for; SO_RCVBUFFORCE when the process may).
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"github.com/perfspy/perfspy/wirefmt/bulk"
)

var (
	addr    = flag.String("addr", "127.0.0.1:0", "UDP listen address")
	mode    = flag.String("mode", bulk.ModePush, "push (read and check) or echo (send back)")
	sockbuf = flag.Int("sockbuf", 7<<20, "UDP receive and send buffer `bytes`")
	corrupt = flag.Int64("corrupt-at", -1, "flip the byte at this transfer `offset` as it is read: a broken path, for the drivers' tests")
)

// transfer is a push in progress.
type transfer struct {
	got   map[uint32]bool
	bad   bool
	start time.Time
}

func main() {
	flag.Parse()
	if *mode != bulk.ModePush && *mode != bulk.ModeEcho {
		log.Fatalf("-mode %q: want push or echo", *mode)
	}
	ua, err := net.ResolveUDPAddr("udp", *addr)
	if err != nil {
		log.Fatalf("-addr %q: %v", *addr, err)
	}
	c, err := net.ListenUDP("udp", ua)
	if err != nil {
		log.Fatal(err)
	}
	if err := bulk.SetBuffers(c, *sockbuf); err != nil {
		log.Fatalf("-sockbuf %d: %v", *sockbuf, err)
	}
	fmt.Fprintln(os.Stderr, "listening on udp", c.LocalAddr(), "mode", *mode)
	buf := make([]byte, 64<<10)
	reply := make([]byte, bulk.HeaderSize)
	pending := map[uint32]*transfer{}
	lastSweep := time.Now()
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			log.Fatal(err)
		}
		if h, err := bulk.ParseHeader(buf[:n]); err == nil && h.Pkt > bulk.HeaderSize && *corrupt >= 0 {
			if i := *corrupt - h.Offset(); i >= 0 && i < int64(n-bulk.HeaderSize) {
				buf[bulk.HeaderSize+int(i)] ^= 0x40
			}
		}
		if *mode == bulk.ModeEcho {
			if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
				log.Printf("echo to %v: %v", from, err)
			}
			continue
		}
		h, err := bulk.ParseHeader(buf[:n])
		if err != nil || h.Count == 0 || h.Seq >= h.Count || h.Pkt <= bulk.HeaderSize {
			continue // not a datagram of a transfer
		}
		tr := pending[h.Transfer]
		if tr == nil {
			tr = &transfer{got: make(map[uint32]bool, h.Count), start: time.Now()}
			pending[h.Transfer] = tr
		}
		tr.got[h.Seq] = true
		if bulk.Check(buf[bulk.HeaderSize:n], h.Offset()) >= 0 {
			tr.bad = true
		}
		if uint32(len(tr.got)) == h.Count {
			status := uint32(0)
			if tr.bad {
				status = 1
			}
			bulk.Header{Transfer: h.Transfer, Pkt: h.Pkt, Seq: uint32(len(tr.got)), Count: status}.Put(reply)
			if _, err := c.WriteToUDPAddrPort(reply, from); err != nil {
				log.Printf("reply to %v: %v", from, err)
			}
			delete(pending, h.Transfer)
		}
		// A transfer that lost a datagram never completes: forget it.
		if time.Since(lastSweep) > 5*time.Second {
			for id, tr := range pending {
				if time.Since(tr.start) > 5*time.Second {
					delete(pending, id)
				}
			}
			lastSweep = time.Now()
		}
	}
}
