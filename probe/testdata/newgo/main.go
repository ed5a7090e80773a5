// Command newgo is a module that asks for Go 1.27.3 (its toolchain line):
// measured from a Go 1.26 install, the go command switches to a toolchain
// it fetches into the module cache. Its handler makes allocations of each
// of Go 1.27's entries: small pointerful `new`s the compiler hands to a
// size-specialized allocator directly, a tiny one, and a slice that
// mallocgc dispatches to its tables.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
)

type pair struct {
	next *pair
	n    int
}

var (
	pairSink *pair
	tinySink *[12]byte
	bufSink  []byte
)

// pairs makes two 16-byte objects with pointers.
//
//go:noinline
func pairs() {
	p := &pair{n: 1}
	p.next = &pair{n: 2}
	pairSink = p
}

// tiny makes one 12-byte object without pointers (the tiny allocator's).
//
//go:noinline
func tiny() { tinySink = new([12]byte) }

// buf makes one 100-byte slice, through makeslice and mallocgc.
//
//go:noinline
func buf(n int) { bufSink = make([]byte, n) }

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		pairs()
		tiny()
		buf(100)
		w.Write([]byte("ok"))
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(ln, nil))
}
