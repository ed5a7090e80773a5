// Command flame draws flame graphs (SVG, single-file HTML, differential)
// from pprof profiles or folded stacks. See the flame package.
package main

import (
	"os"

	"github.com/perfspy/perfspy/flame"
)

func main() {
	os.Exit(flame.Command(os.Args[1:], os.Stdout, os.Stderr))
}
