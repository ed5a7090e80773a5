// Command flame draws flame graphs (SVG, single-file HTML, differential)
// from pprof profiles or folded stacks. See the flame package.
package main

import (
	"os"
	"runtime/debug"

	"github.com/perfspy/perfspy/flame"
)

func main() {
	// The call tree is one large pointer-free arena: a tighter GC target
	// keeps the peak close to it, at little cost in time.
	debug.SetGCPercent(25)
	os.Exit(flame.Command(os.Args[1:], os.Stdout, os.Stderr))
}
