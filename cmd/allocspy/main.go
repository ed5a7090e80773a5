// Command allocspy measures what allocspy's runtime overlay costs:
//
//	allocspy bench [-what malloc,httpjson-allocs] [-rounds N] [-duration D]
//
// probe uses allocspy by default; see docs/allocspy.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/perfspy/perfspy/internal/overhead"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := 2
	if len(os.Args) > 1 && os.Args[1] == "bench" {
		code = overhead.Main(ctx, "allocspy", "malloc,httpjson-allocs", os.Args[2:], os.Stdout, os.Stderr)
	} else {
		fmt.Fprintln(os.Stderr, "usage: allocspy bench [-what malloc,httpjson-allocs] [-rounds N] [-duration D]")
	}
	stop()
	os.Exit(code)
}
