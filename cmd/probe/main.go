// Command probe wraps an unchanged Go server, measures it under bounded load
// in a dump window, and reports per-request figures. See the probe package.
//
//	probe cost [-what offcpu,driver,allocdiff,flame,attribution,handoff] [-rounds N]
//
// measures what perfspy's own instruments cost against the references
// ("bench" is the old name of cost).
package main

import (
	"io"
	"os"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/internal/cost"
	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/review"
	"github.com/perfspy/perfspy/routes"
)

// handoff times channel operations plain and with the request mark's
// overlay, its handoffs off and on.
var handoff = cost.Micro{
	Name: "handoff", Pkg: "./routes/testdata/chanbench", Tag: "routes", Sizes: []string{"self", "pingpong", "select", "cond", "close"},
	Overlay: func(goroot, _, _, dir string) (map[string]string, error) {
		return routes.RuntimeOverlay(goroot, dir)
	},
}

func main() {
	ctx, stop := cmdmain.SignalContext()
	defer stop()
	cmdmain.Run(func(stdout, stderr io.Writer) int {
		if len(os.Args) > 1 && (os.Args[1] == "cost" || os.Args[1] == "bench") {
			benches := []cost.Bench{cost.OffCPU, cost.Driver, cost.BenchCmd, cost.Allocdiff, cost.Flame, cost.Attribution, cost.Live, cost.LiveInstructions, cost.MicroBench(handoff)}
			return cost.Main(ctx, cost.Command{Name: "probe", Benches: benches, Defaults: "offcpu"}, os.Args[2:], stdout, stderr)
		}
		if len(os.Args) > 1 && os.Args[1] == "review" {
			return review.Main(ctx, os.Args[2:], stdout, stderr)
		}
		return probe.Main(ctx, os.Args[1:], stdout, stderr)
	})
}
