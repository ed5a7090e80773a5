// Command allocdiff compares two builds' profiles function by function on
// normalized keys. See the diff package.
package main

import (
	"io"
	"os"

	"github.com/perfspy/perfspy/diff"
	"github.com/perfspy/perfspy/internal/cmdmain"
)

func main() {
	cmdmain.Run(func(stdout, stderr io.Writer) int { return diff.Command(os.Args[1:], stdout, stderr) })
}
