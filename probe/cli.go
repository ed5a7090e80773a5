package probe

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Exit codes shared by every perfspy command.
const (
	ExitOK        = 0
	ExitFailed    = 1
	ExitUsage     = 2
	ExitNotJudged = 3
)

const usage = `usage: probe <command> [flags] [target]

commands:
  run    build the target with the agent, measure a timing window, an
         attribution window and an off-CPU window, write a results folder
  bench  what the off-CPU window costs, against fgprof (-what offcpu)

The target is a directory holding a main package (of this module or
another), or module/path/cmd/x@version. Default: ` + DefaultTarget + `

Run 'probe run -h' for the flags.
`

// Main is the probe command. It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	switch args[0] {
	case "run":
		return mainRun(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	fmt.Fprintf(stderr, "probe: unknown command %q\n%s", args[0], usage)
	return ExitUsage
}

func mainRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var targetArgs, bodyFile string
	quiet := fs.Bool("q", false, "quiet: no progress lines")
	fs.StringVar(&targetArgs, "args", "", "arguments for the target, split as a shell would")
	fs.StringVar(&cfg.Addr, "addr", "", "address the target listens on (default: found from its sockets)")
	fs.StringVar(&cfg.Path, "path", "", "request path (default /json for the default target, / otherwise)")
	fs.StringVar(&cfg.Method, "method", "GET", "request method")
	fs.StringVar(&bodyFile, "body", "", "`file` whose contents are sent as every request's body")
	fs.IntVar(&cfg.Conns, "conns", 8, "keep-alive connections")
	fs.StringVar(&cfg.Proto, "proto", "auto", "load driver: auto (framed for targets/rpcecho, else http), http or framed")
	fs.IntVar(&cfg.BodySize, "body-size", 1024, "framed: request body size in bytes")
	var headers headerFlag
	fs.Var(&headers, "header", "HTTP request header `K: V` (repeatable)")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "warm-up load before each window")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "load in each window")
	fs.StringVar(&cfg.CPUs, "cpus", "auto", "pin `SERVER:LOAD` cpus (e.g. 0:1), auto (split the machine in halves) or none")
	fs.StringVar(&cfg.Out, "out", "", "results `dir` (default results/<UTC>_<commit>_<target>); never overwritten")
	fs.DurationVar(&cfg.ReadyTimeout, "ready-timeout", 60*time.Second, "how long to wait for the target to listen")
	fs.StringVar(&cfg.Allocs, "allocs", "allocspy", "allocation source: allocspy (runtime overlay) or heapprofile (MemProfileRate=1)")
	fs.BoolVar(&cfg.Floor, "floor", false, "also measure targets/floor (a 2-byte response) and report CPU per request against it")
	fs.BoolVar(&cfg.OffCPU, "offcpu", true, "add the off-CPU window: execution trace, block and mutex profiles")
	fs.BoolVar(&cfg.Wallclock, "wallclock", true, "with -offcpu, add an fgprof wall-clock profile to the off-CPU window")
	fs.StringVar(&cfg.Syscalls, "syscalls", "bpf", "syscall source: bpf (eBPF on sys_enter; /proc/PID/io when not root) or proc-io")
	fs.StringVar(&cfg.Copies, "copies", "overlay", "copy counting: overlay (copyspy runtime overlay) or off")
	fs.Int64Var(&cfg.MinRequests, "min-requests", 100, "fewer successful requests in a window make it not judged")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: probe run [flags] [target]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	// Flags may also follow the target.
	if fs.NArg() > 0 {
		cfg.Target = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return ExitOK
			}
			return ExitUsage
		}
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "probe run: one target only, got %q and %q\n", cfg.Target, fs.Arg(0))
			return ExitUsage
		}
	}
	if cfg.Duration <= 0 {
		fmt.Fprintf(stderr, "probe run: -duration %v: must be positive\n", cfg.Duration)
		return ExitUsage
	}
	if cfg.Warmup < 0 {
		fmt.Fprintf(stderr, "probe run: -warmup %v: must not be negative\n", cfg.Warmup)
		return ExitUsage
	}
	if cfg.Conns <= 0 {
		fmt.Fprintf(stderr, "probe run: -conns %d: must be positive\n", cfg.Conns)
		return ExitUsage
	}
	if cfg.Allocs != "allocspy" && cfg.Allocs != "heapprofile" {
		fmt.Fprintf(stderr, "probe run: -allocs %q: want allocspy or heapprofile\n", cfg.Allocs)
		return ExitUsage
	}
	if cfg.Syscalls != "bpf" && cfg.Syscalls != "proc-io" {
		fmt.Fprintf(stderr, "probe run: -syscalls %q: want bpf or proc-io\n", cfg.Syscalls)
		return ExitUsage
	}
	if cfg.Copies != "overlay" && cfg.Copies != "off" {
		fmt.Fprintf(stderr, "probe run: -copies %q: want overlay or off\n", cfg.Copies)
		return ExitUsage
	}
	if _, err := parseCPUs(cfg.CPUs, runtime.NumCPU()); err != nil {
		fmt.Fprintf(stderr, "probe run: -cpus: %v\n", err)
		return ExitUsage
	}
	var err error
	if cfg.Args, err = splitArgs(targetArgs); err != nil {
		fmt.Fprintf(stderr, "probe run: -args: %v\n", err)
		return ExitUsage
	}
	if bodyFile != "" {
		if cfg.Body, err = os.ReadFile(bodyFile); err != nil {
			fmt.Fprintf(stderr, "probe run: -body: %v\n", err)
			return ExitUsage
		}
	}
	cfg.Headers = headers.m
	fs.Visit(func(f *flag.Flag) { cfg.Flags = append(cfg.Flags, "-"+f.Name+"="+f.Value.String()) })
	var logw io.Writer = stderr
	if *quiet {
		logw = nil
	}
	res, err := Run(ctx, cfg, logw)
	if res != nil {
		WriteTerminal(stdout, res)
	}
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrNotJudged):
		fmt.Fprintf(stderr, "probe run: %v\n", err)
		return ExitNotJudged
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "probe run: interrupted; the target was stopped\n")
		return ExitFailed
	}
	fmt.Fprintf(stderr, "probe run: %v\n", err)
	return ExitFailed
}

// headerFlag collects -header "K: V" flags.
type headerFlag struct{ m map[string]string }

func (h *headerFlag) String() string {
	if h == nil || h.m == nil {
		return ""
	}
	var s []string
	for k, v := range h.m {
		s = append(s, k+": "+v)
	}
	return strings.Join(sortedStrings(s), ", ")
}

func (h *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want K: V, got %q", v)
	}
	if h.m == nil {
		h.m = map[string]string{}
	}
	h.m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	return nil
}
