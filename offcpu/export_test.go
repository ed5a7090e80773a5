package offcpu

import (
	"flag"

	"golang.org/x/exp/trace"
)

var update = flag.Bool("update", false, "rewrite testdata/scenario.trace")

// NoStackForTest is a stack-less wait for classify.
var NoStackForTest = trace.NoStack
