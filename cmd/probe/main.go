// Command probe wraps an unchanged Go server, measures it under bounded load
// in a dump window, and reports per-request figures. See the probe package.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/perfspy/perfspy/internal/overhead"
	"github.com/perfspy/perfspy/probe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if len(os.Args) > 1 && os.Args[1] == "bench" {
		// What the off-CPU window costs, against fgprof.
		code = overhead.Main(ctx, "probe", "offcpu", os.Args[2:], os.Stdout, os.Stderr)
	} else {
		code = probe.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}
