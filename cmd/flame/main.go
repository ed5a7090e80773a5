// Command flame draws flame graphs (SVG, single-file HTML, differential)
// from pprof profiles or folded stacks. See the flame package.
package main

import (
	"io"
	"os"
	"runtime/debug"

	"github.com/perfspy/perfspy/flame"
	"github.com/perfspy/perfspy/internal/cmdmain"
)

func main() {
	// The input and the stacks are large pointer-free arrays: a tighter
	// GC target keeps the peak close to them, at little cost in time.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	cmdmain.Run(func(stdout, stderr io.Writer) int { return flame.Command(os.Args[1:], stdout, stderr) })
}
