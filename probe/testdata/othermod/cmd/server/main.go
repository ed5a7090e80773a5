// Command server is a main package of another module, probed unchanged.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
)

var sink [][]byte

func init() { sink = make([][]byte, 3) }

// orders makes exactly n allocations of 48 bytes.
//
//go:noinline
func orders(n int) {
	for i := 0; i < n; i++ {
		sink[i%3] = make([]byte, 48)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("/orders", func(w http.ResponseWriter, r *http.Request) {
		orders(3)
		w.Write([]byte("[]"))
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(ln, nil))
}
