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
}
