// Command mallocbench times heap allocations at a few sizes. Built with the
// allocspy overlay and -tags allocspy it times the recorder off and on;
// built plain it times the unpatched runtime. It prints one line per size
// and mode: "size mode ns/op".
package main

import (
	"flag"
	"fmt"
	"time"
)

var sink []byte

//go:noinline
func alloc(n int) { sink = make([]byte, n) }

func timeAllocs(n, iters int) float64 {
	start := time.Now()
	for i := 0; i < iters; i++ {
		alloc(n)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(iters)
}

// deep calls f from depth frames further down the stack: a stack as deep
// as a server's handler (size "64d30" is 64 B allocated 30 frames down).
//
//go:noinline
func deep(depth int, f func() float64) float64 {
	if depth == 0 {
		return f()
	}
	return deep(depth-1, f) + 0
}

func main() {
	iters := flag.Int("iters", 2_000_000, "allocations per measurement")
	flag.Parse()
	for _, n := range []int{8, 64, 1024} {
		timeAllocs(n, *iters/10) // warm up
		for _, mode := range modes {
			enable(mode == "on")
			fmt.Printf("%d %s %.3f\n", n, mode, timeAllocs(n, *iters))
		}
		enable(false)
	}
	for _, mode := range modes {
		enable(mode == "on")
		ns := deep(30, func() float64 { return timeAllocs(64, *iters) })
		fmt.Printf("64d30 %s %.3f\n", mode, ns)
	}
	enable(false)
}
