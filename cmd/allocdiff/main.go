// Command allocdiff compares two builds' profiles function by function on
// normalized keys. See the diff package.
package main

import (
	"os"

	"github.com/perfspy/perfspy/diff"
)

func main() {
	os.Exit(diff.Command(os.Args[1:], os.Stdout, os.Stderr))
}
