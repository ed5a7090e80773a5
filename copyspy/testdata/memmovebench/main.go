// Command memmovebench times memmove at a few sizes. Built with the copyspy
// overlay and -tags copyspy it times the recorder off and on; built plain it
// times the unpatched runtime. It prints one line per size and mode:
// "size mode ns/op".
package main

import (
	"flag"
	"fmt"
	"time"
)

var (
	src  = make([]byte, 1<<16)
	dst  = make([]byte, 1<<16)
	sink int
)

//go:noinline
func copyN(n int) int { return copy(dst[:n], src[:n]) }

func timeCopies(n, iters int) float64 {
	start := time.Now()
	s := 0
	for i := 0; i < iters; i++ {
		s += copyN(n)
	}
	sink = s
	return float64(time.Since(start).Nanoseconds()) / float64(iters)
}

// deep calls f from depth frames further down the stack: a stack as deep
// as a server's handler (size "64d30" is 64 B copied 30 frames down).
//
//go:noinline
func deep(depth int, f func() float64) float64 {
	if depth == 0 {
		return f()
	}
	return deep(depth-1, f) + 0
}

func main() {
	iters := flag.Int("iters", 2_000_000, "copies per measurement")
	flag.Parse()
	for _, n := range []int{0, 64, 4096} {
		timeCopies(n, *iters/10) // warm up
		for _, mode := range modes {
			enable(mode == "on")
			fmt.Printf("%d %s %.3f\n", n, mode, timeCopies(n, *iters))
		}
		enable(false)
	}
	for _, mode := range modes {
		enable(mode == "on")
		ns := deep(30, func() float64 { return timeCopies(64, *iters) })
		fmt.Printf("64d30 %s %.3f\n", mode, ns)
	}
	enable(false)
}
