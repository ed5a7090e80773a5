// Command quicecho is a QUIC bulk-transfer server (github.com/quic-go/quic-go):
// on each stream a client sends a transfer of bytes of the pattern of
// wirefmt/bulk and ends its side of the stream.
//
//	-mode=push   the server reads the transfer, checks every byte and replies
//	             with the count read and the first wrong offset (16 bytes)
//	-mode=echo   the server writes back what it reads
//
// -corrupt-at N flips the byte at offset N of every transfer: the drivers'
// tests check that they notice.
//
// TLS 1.3 with a certificate generated at start. -sockbuf N sets the UDP
// socket's receive and send buffers after quic-go has sized them (0 keeps
// quic-go's). quic-go's own environment switches apply, e.g.
// QUIC_GO_DISABLE_GSO=1 turns off UDP segmentation offload.
//
// The default address, 127.0.0.1:0, picks a free UDP port; the server prints
// the address it listens on.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"os"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/perfspy/perfspy/wirefmt/bulk"
)

var (
	addr    = flag.String("addr", "127.0.0.1:0", "UDP listen address")
	mode    = flag.String("mode", bulk.ModePush, "push (read and check) or echo (write back)")
	sockbuf = flag.Int("sockbuf", 0, "UDP receive and send buffer `bytes` (0: quic-go's)")
	corrupt = flag.Int64("corrupt-at", -1, "flip the byte at this transfer `offset` as it is read: a broken path, for the drivers' tests")
)

// flip breaks the byte at offset -corrupt-at if it is in b, which holds
// the transfer's bytes from off.
func flip(b []byte, off int64) {
	if i := *corrupt - off; *corrupt >= 0 && i >= 0 && i < int64(len(b)) {
		b[i] ^= 0x40
	}
}

// certificate makes a self-signed ECDSA certificate for 127.0.0.1.
func certificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "quicecho"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// push reads a transfer to its end, checking every byte, and replies.
func push(st *quic.Stream, buf []byte) error {
	r := bulk.Reply{BadAt: -1}
	for {
		n, err := st.Read(buf)
		flip(buf[:n], r.Received)
		if r.BadAt < 0 {
			r.BadAt = bulk.Check(buf[:n], r.Received)
		}
		r.Received += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if _, err := st.Write(r.Append(buf[:0])); err != nil {
		return err
	}
	return st.Close()
}

// echo writes back what it reads, then ends its side.
func echo(st *quic.Stream, buf []byte) error {
	var off int64
	for {
		n, err := st.Read(buf)
		flip(buf[:n], off)
		off += int64(n)
		if n > 0 {
			if _, werr := st.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return st.Close()
		}
		if err != nil {
			return err
		}
	}
}

func serveConn(conn *quic.Conn) {
	for {
		st, err := conn.AcceptStream(context.Background())
		if err != nil {
			return // the client closed the connection
		}
		go func() {
			buf := make([]byte, 64<<10)
			var err error
			if *mode == bulk.ModeEcho {
				err = echo(st, buf)
			} else {
				err = push(st, buf)
			}
			if err != nil {
				var ae *quic.ApplicationError
				if !errors.As(err, &ae) {
					log.Printf("stream %d: %v", st.StreamID(), err)
				}
				st.CancelRead(1)
				st.CancelWrite(1)
			}
		}()
	}
}

func main() {
	flag.Parse()
	if *mode != bulk.ModePush && *mode != bulk.ModeEcho {
		log.Fatalf("-mode %q: want push or echo", *mode)
	}
	cert, err := certificate()
	if err != nil {
		log.Fatal(err)
	}
	ua, err := net.ResolveUDPAddr("udp", *addr)
	if err != nil {
		log.Fatalf("-addr %q: %v", *addr, err)
	}
	uc, err := net.ListenUDP("udp", ua)
	if err != nil {
		log.Fatal(err)
	}
	tr := &quic.Transport{Conn: uc}
	ln, err := tr.Listen(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{bulk.ALPN}, MinVersion: tls.VersionTLS13},
		&quic.Config{MaxIncomingStreams: 1 << 12, MaxIdleTimeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	if *sockbuf > 0 {
		// After Listen: quic-go raises the buffers when it takes the socket.
		if err := uc.SetReadBuffer(*sockbuf); err != nil {
			log.Fatal(err)
		}
		if err := uc.SetWriteBuffer(*sockbuf); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Fprintln(os.Stderr, "listening on udp", uc.LocalAddr(), "mode", *mode)
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		go serveConn(conn)
	}
}
