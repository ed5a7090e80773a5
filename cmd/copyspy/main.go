// Command copyspy counts bytes copied per call site in a running Go process
// (attach mode, eBPF). See the copyspy package.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/perfspy/perfspy/copyspy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := copyspy.Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
