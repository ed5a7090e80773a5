// Command prog (version 2): version 1 with a closure added above the
// allocating closure (which renumbers it) and one new allocation site,
// newSite, that allocates 300 times.
package main

import (
	"flag"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
)

var sink []byte

//go:noinline
func named(n int) {
	for i := 0; i < n; i++ {
		sink = make([]byte, 128)
	}
}

//go:noinline
func newSite(n int) {
	for i := 0; i < n; i++ {
		sink = make([]byte, 256)
	}
}

var counter int

func main() {
	// Every allocation of main.main counted, in both versions: one
	// sampled at the default rate would be a change that is not one.
	runtime.MemProfileRate = 1
	out := flag.String("o", "allocs.pb.gz", "profile to write")
	flag.Parse()
	count := func() { counter++ }
	work := func(n int) {
		for i := 0; i < n; i++ {
			sink = make([]byte, 64)
		}
	}
	count()
	work(1000)
	named(500)
	newSite(300)
	runtime.GC()
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		log.Fatal(err)
	}
	f.Close()
}
