package cmdmain

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Interrupted is the exit code after a second SIGINT or SIGTERM: 128 + 2,
// as a shell reports a process killed by SIGINT.
const Interrupted = 130

// SignalContext is canceled at the first SIGINT or SIGTERM, so that the
// command stops, kills what it started and keeps what it finished. A
// second one exits at once (Interrupted): a command stuck where the first
// cannot reach it (an open() of a FIFO, a read of a pipe) still ends, and
// the processes it started die with it (contain.DieWithParent).
func SignalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		cancel()
		<-ch
		fmt.Fprintf(os.Stderr, "%s: a second signal: exiting now\n", progName())
		os.Exit(Interrupted)
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
	}
}
