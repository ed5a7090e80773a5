// Command allocspy measures what allocspy's runtime overlay costs:
//
//	allocspy cost [-what malloc,httpjson-allocs,attribution] [-rounds N] [-duration D]
//
// ("bench" is the old name of cost). probe uses allocspy by default; see
// docs/allocspy.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/internal/cost"
)

// malloc times allocations at three sizes, plain and with the overlay.
var malloc = cost.Micro{
	Name: "malloc", Pkg: "./allocspy/testdata/mallocbench", Tag: "allocspy", Sizes: []string{"8", "64", "1024"},
	Overlay: allocspy.Overlay,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := 2
	if len(os.Args) > 1 && (os.Args[1] == "cost" || os.Args[1] == "bench") {
		benches := []cost.Bench{cost.MicroBench(malloc), cost.HTTPJSONAllocs, cost.Attribution}
		code = cost.Main(ctx, cost.Command{Name: "allocspy", Benches: benches, Defaults: "malloc,httpjson-allocs"}, os.Args[2:], os.Stdout, os.Stderr)
	} else {
		fmt.Fprintln(os.Stderr, "usage: allocspy cost [-what malloc,httpjson-allocs,attribution] [-rounds N] [-duration D]")
	}
	stop()
	os.Exit(code)
}
