// Command copyspy counts bytes copied per call site in a running Go process
// (attach mode, eBPF), and measures copyspy's own cost:
//
//	copyspy cost [-what memmove,httpjson] [-rounds N] [-duration D]
//
// ("bench" is the old name of cost). See the copyspy package.
package main

import (
	"io"
	"os"

	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/internal/cost"
)

// memmove times memmove at three sizes, plain and with the overlay.
var memmove = cost.Micro{
	Name: "memmove", Pkg: "./copyspy/testdata/memmovebench", Tag: "copyspy", Sizes: []string{"0", "64", "4096", "64d30"},
	Overlay: func(goroot, goarch, _, dir string) (map[string]string, error) {
		return copyspy.Overlay(goroot, goarch, dir)
	},
}

func main() {
	ctx, stop := cmdmain.SignalContext()
	defer stop()
	cmdmain.Run(func(stdout, stderr io.Writer) int {
		if len(os.Args) > 1 && (os.Args[1] == "cost" || os.Args[1] == "bench") {
			benches := []cost.Bench{cost.MicroBench(memmove), cost.HTTPJSONCopies}
			return cost.Main(ctx, cost.Command{Name: "copyspy", Benches: benches, Defaults: "memmove,httpjson"}, os.Args[2:], stdout, stderr)
		}
		return copyspy.Command(ctx, os.Args[1:], stdout, stderr)
	})
}
