// Command copyspy counts bytes copied per call site in a running Go process
// (attach mode, eBPF), and measures copyspy's own cost (bench). See the
// copyspy package.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/overhead"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if len(os.Args) > 1 && os.Args[1] == "bench" {
		code = overhead.Main(ctx, "copyspy", "memmove,httpjson", os.Args[2:], os.Stdout, os.Stderr)
	} else {
		code = copyspy.Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}
