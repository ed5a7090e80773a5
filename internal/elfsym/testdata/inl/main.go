// Command inl has a function the compiler inlines (into scale, and scale
// into main) and one it does not.
package main

import "os"

func sumsq(x int) int {
	s := 0
	for i := 0; i < x; i++ {
		s += i * i // the inlined line
	}
	return s
}

func scale(x int) int {
	return sumsq(x) + 1 // sumsq inlined here
}

//go:noinline
func kept(x int) int {
	return x + 3
}

func main() {
	n := len(os.Args)
	n = scale(n) // scale, and sumsq in it, inlined here
	os.Exit(kept(n))
}
