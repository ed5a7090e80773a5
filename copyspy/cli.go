package copyspy

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/perfspy/perfspy/internal/cmdmain"
)

const usage = `usage: copyspy attach -pid PID [-duration D] -o FILE

Counts the bytes an unmodified Go process copies (runtime.memmove) and
clears (runtime.memclrNoHeapPointers), by call site, with eBPF uprobes.
Needs root. Stripped binaries work.

Every uprobe hit costs microseconds (a trap into the kernel): attach mode is
a diagnostic for a process you cannot rebuild, not a benchmark mode. For
figures per request use 'probe run', whose runtime overlay costs
nanoseconds per copy.
`

// Command is the copyspy command; it returns the exit code (0 done,
// 1 failed, 2 usage).
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "attach" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "help" || args[0] == "--help") {
			fmt.Fprint(stdout, usage)
			return cmdmain.OK
		}
		fmt.Fprint(stderr, usage)
		return cmdmain.Usage
	}
	fs := flag.NewFlagSet("copyspy attach", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage, "\nflags:\n"); fs.PrintDefaults() }
	pid := fs.Int("pid", 0, "process to attach to")
	dur := fs.Duration("duration", 10*time.Second, "how long to count (Ctrl-C stops early)")
	out := fs.String("o", "", "output `file` (pprof, gzipped)")
	requests := fs.Int64("requests", 0, "requests served in the window, if known: written as perfspy.requests")
	if code, ok := cmdmain.Parse(fs, args[1:]); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "copyspy attach: unexpected argument %q\n", fs.Arg(0))
		return cmdmain.Usage
	case *pid <= 0:
		fmt.Fprintln(stderr, "copyspy attach: -pid is required")
		return cmdmain.Usage
	case *out == "":
		fmt.Fprintln(stderr, "copyspy attach: -o is required")
		return cmdmain.Usage
	case *dur <= 0:
		fmt.Fprintf(stderr, "copyspy attach: -duration %v: must be positive\n", *dur)
		return cmdmain.Usage
	}
	if err := attachRun(ctx, *pid, *dur, *out, *requests, stderr); err != nil {
		fmt.Fprintf(stderr, "copyspy attach: %v\n", err)
		return cmdmain.Failed
	}
	return cmdmain.OK
}

func attachRun(ctx context.Context, pid int, dur time.Duration, out string, requests int64, stderr io.Writer) error {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	defer f.Close()
	s, err := Attach(pid)
	if err != nil {
		os.Remove(out)
		return err
	}
	defer s.Close()
	fmt.Fprintf(stderr, "copyspy: attached to pid %d (%s) for %v\n", pid, s.exe, dur)
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(dur):
	}
	secs := time.Since(start).Seconds()
	rep, err := s.Report()
	if err != nil {
		os.Remove(out)
		return err
	}
	p := Profile(rep)
	p.Comments = []string{fmt.Sprintf("perfspy.window_seconds=%.3f", secs), "perfspy.target=" + s.exe, "perfspy.source=copyspy-attach"}
	if requests > 0 {
		p.Comments = append([]string{fmt.Sprintf("perfspy.requests=%d", requests)}, p.Comments...)
	}
	if err := p.Write(f); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return f.Close()
}
