// Command prog (version 1) makes a known number of allocations and writes
// the allocation profile to the file named by -o. diff's tests build it and
// version 2 in two directories and compare the profiles.
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

func main() {
	// Every allocation of main.main counted, in both versions: one
	// sampled at the default rate would be a change that is not one.
	runtime.MemProfileRate = 1
	out := flag.String("o", "allocs.pb.gz", "profile to write")
	flag.Parse()
	work := func(n int) {
		for i := 0; i < n; i++ {
			sink = make([]byte, 64)
		}
	}
	work(1000)
	named(500)
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
