// Command allocdiff compares two builds' profiles function by function on
// normalized keys. See the diff package.
package main

import (
	"io"
	"os"
	"runtime/debug"

	"github.com/perfspy/perfspy/diff"
	"github.com/perfspy/perfspy/internal/cmdmain"
)

func main() {
	// The decoded profiles are large pointer-free arrays: a tighter GC
	// target keeps the peak close to them, at little cost in time.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	cmdmain.Run(func(stdout, stderr io.Writer) int { return diff.Command(os.Args[1:], stdout, stderr) })
}
