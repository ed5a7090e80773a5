// Command allocspy measures what allocspy's runtime overlay costs:
//
//	allocspy cost [-what malloc,httpjson-allocs,attribution] [-rounds N] [-duration D]
//
// ("bench" is the old name of cost). probe uses allocspy by default; see
// docs/allocspy.md.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/internal/cost"
)

// malloc times allocations at three sizes, plain and with the overlay.
var malloc = cost.Micro{
	Name: "malloc", Pkg: "./allocspy/testdata/mallocbench", Tag: "allocspy", Sizes: []string{"8", "64", "1024", "64d30"},
	Overlay: allocspy.Overlay,
}

func main() {
	ctx, stop := cmdmain.SignalContext()
	defer stop()
	cmdmain.Run(func(stdout, stderr io.Writer) int {
		if len(os.Args) > 1 && (os.Args[1] == "cost" || os.Args[1] == "bench") {
			benches := []cost.Bench{cost.MicroBench(malloc), cost.HTTPJSONAllocs, cost.Attribution}
			return cost.Main(ctx, cost.Command{Name: "allocspy", Benches: benches, Defaults: "malloc,httpjson-allocs"}, os.Args[2:], stdout, stderr)
		}
		fmt.Fprintln(stderr, "usage: allocspy cost [-what malloc,httpjson-allocs,attribution] [-rounds N] [-duration D]")
		return cmdmain.Usage
	})
}
