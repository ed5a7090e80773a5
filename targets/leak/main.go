// Command leak is a server whose requests leave known things behind:
// GET /leak keeps one 256-byte object per request (made in main.keep) in
// a map (whose tables grow in main.handleLeak) and, on every 10th request, starts a goroutine that never
// returns (main.stuck, started by main.handleLeak); GET /clean
// allocates the same 256 bytes and keeps nothing. probe run's retained
// window must say exactly that: 1 object and 256 B retained per request
// at main.keep and 0.1 goroutines left per request for /leak, 0 and 0
// for /clean. GET /lost keeps nothing and, on every 10th request, starts
// a goroutine that waits on a channel only it holds (main.lost): the GC's
// goroutine leak profile (Go 1.27) finds it blocked for good, while
// main.stuck's channel, a global, could still be closed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
)

var (
	mu    sync.Mutex
	kept  = map[int][]byte{}
	count int
	never = make(chan struct{})
	// escape is called through a variable, so that the compiler cannot
	// see that its argument goes nowhere: the garbage is on the heap.
	escape = func([]byte) {}
)

// keep makes the object a request keeps; handleLeak puts it in the map,
// whose growth is then its own.
//
//go:noinline
func keep(n int) []byte {
	b := make([]byte, 256)
	b[0] = byte(n)
	return b
}

//go:noinline
func garbage(n int) {
	b := make([]byte, 256)
	b[0] = byte(n)
	escape(b)
}

// stuck waits on a channel nobody closes.
func stuck() { <-never }

// lost waits on a channel no other goroutine holds.
func lost(c chan struct{}) { <-c }

func handleLost(w http.ResponseWriter, r *http.Request) {
	mu.Lock()
	count++
	n := count
	mu.Unlock()
	if n%10 == 0 {
		go lost(make(chan struct{}))
	}
	w.Write([]byte("ok"))
}

func handleLeak(w http.ResponseWriter, r *http.Request) {
	mu.Lock()
	count++
	n := count
	kept[n] = keep(n)
	mu.Unlock()
	if n%10 == 0 {
		go stuck()
	}
	w.Write([]byte("ok"))
}

func handleClean(w http.ResponseWriter, r *http.Request) {
	mu.Lock()
	count++
	n := count
	garbage(n)
	mu.Unlock()
	w.Write([]byte("ok"))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "leak: listening on %s\n", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /leak", handleLeak)
	mux.HandleFunc("GET /clean", handleClean)
	mux.HandleFunc("GET /lost", handleLost)
	log.Fatal(http.Serve(ln, mux))
}
