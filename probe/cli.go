package probe

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/internal/gorelease"
	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/shellwords"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/metric"
	"github.com/perfspy/perfspy/profstore"
	"github.com/perfspy/perfspy/report"
)

// Exit codes shared by every perfspy command (internal/cmdmain).
const (
	ExitOK        = cmdmain.OK
	ExitFailed    = cmdmain.Failed
	ExitUsage     = cmdmain.Usage
	ExitNotJudged = cmdmain.NotJudged
)

const usage = `usage: probe <command> [flags] [target]

commands:
  run    build the target with the agent, measure a timing window, an
         attribution window and an off-CPU window, write a results folder
  ab     build two git revisions, measure them in interleaved rounds, test
         significance, write the review table (-before REV -after REV)
  review every server and benchmark of .perfspy.yml at two revisions, the
         file's gates, a pull request comment and line annotations
         (docs/review.md)
  bisect the commit where an exact count changed, one counted run per step
         (-good REV -bad REV [-metric allocs/req], docs/bisect.md)
  build  build the target with the agent and the runtime overlays into a
         binary that runs on its own, its build list unchanged (-o FILE;
         docs/live.md)
  bulk   QUIC push and echo against the UDP floor, one row per transfer
         size (-sizes 1K,64K,1M,2M, -rounds 3, the first dropped)
  pprof  a run's profile per request, of one route with -route R, for go
         tool pprof -top and -diff_base (docs/probe.md)
  cost   what perfspy's instruments cost, against the references
         (-what offcpu,allocdiff,flame,attribution,live,live-instructions,handoff)

The target is a directory holding a main package (of this module or
another), or module/path/cmd/x@version. Default: ` + DefaultTarget + `
With -bench REGEXP, run and ab measure a package's Go benchmarks instead,
per op in each timed region: a package folder, module/path/pkg@version or
a standard-library import path (docs/bench.md).

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
	case "ab":
		return mainAB(ctx, args[1:], stdout, stderr)
	case "bulk":
		return mainBulk(ctx, args[1:], stdout, stderr)
	case "build":
		return mainBuild(ctx, args[1:], stdout, stderr)
	case "bisect":
		return mainBisect(ctx, args[1:], stdout, stderr)
	case "pprof":
		return mainPprof(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	fmt.Fprintf(stderr, "probe: unknown command %q\n%s", args[0], usage)
	return ExitUsage
}

// parseRunFlags reads probe run's flags (and extra ones, for probe ab)
// and the target. ok is false when the command must exit with code.
func parseRunFlags(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (cfg Config, opt cliOptions, code int, ok bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if extra != nil {
		extra(fs)
	}
	f := defineRunFlags(fs, &cfg, &opt)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [flags] [target]\n\nflags:\n", name)
		fs.PrintDefaults()
	}
	if code, ok := cmdmain.Parse(fs, args); !ok {
		return cfg, opt, code, false
	}
	// Flags may also follow the target.
	if fs.NArg() > 0 {
		cfg.Target = fs.Arg(0)
		if code, ok := cmdmain.Parse(fs, fs.Args()[1:]); !ok {
			return cfg, opt, code, false
		}
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "%s: one target only, got %q and %q\n", name, cfg.Target, fs.Arg(0))
			return cfg, opt, ExitUsage, false
		}
	}
	cfg.Env = f.env.kv
	if *f.maxBody <= 0 {
		fmt.Fprintf(stderr, "%s: -max-body %d: want a positive number of bytes\n", name, *f.maxBody)
		return cfg, opt, ExitUsage, false
	}
	if *f.fgprofOnly {
		cfg.Wallclock, cfg.FgprofOnly = true, true
	}
	cfg.NoBills = !*f.bills
	var err error
	if opt.bench.Exec, err = shellwords.Split(*f.execCmd); err != nil {
		fmt.Fprintf(stderr, "%s: -exec: %v\n", name, err)
		return cfg, opt, ExitUsage, false
	}
	// The inputs first: the checks of every flag and its combinations
	// (-data with -proto, the .proto files) see them, before any build.
	if err := readRunInputs(&cfg, f.targetArgs, f.bodyFile, *f.maxBody, f.pushLabels, f.readData); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return cfg, opt, ExitUsage, false
	}
	if err := opt.checkMode(&cfg, stderr, name); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return cfg, opt, ExitUsage, false
	}
	cfg.Headers = f.headers.m
	cfg.Flags = recordedFlags(fs)
	opt.bench.Flags, opt.quiet = cfg.Flags, *f.q
	return cfg, opt, 0, true
}

// runFlags are the flags whose values are read after parsing, beside
// those that land in a Config or the benchmark options directly.
type runFlags struct {
	q, fgprofOnly, bills *bool
	targetArgs, bodyFile string
	execCmd              *string
	maxBody              *int64
	env                  envFlag
	headers              headerFlag
	readData             func(maxBody int64) error
	pushLabels           func() error
}

// defineRunFlags defines probe run's flags on fs, into cfg and opt.
func defineRunFlags(fs *flag.FlagSet, cfg *Config, opt *cliOptions) *runFlags {
	d := DefaultConfig()
	f := &runFlags{q: fs.Bool("q", false, "quiet: no progress lines")}
	fs.StringVar(&f.targetArgs, "args", "", "arguments for the target, split as a shell would")
	fs.StringVar(&cfg.Addr, "addr", "", "the target's address to load, when it listens on several: HOST:PORT, :PORT or PORT (a fixed port), or flag:NAME (the target's own flag that takes a listen address: probe gives it a free loopback port on every run) (default: found from its sockets)")
	fs.StringVar(&cfg.Path, "path", "", "request path (default /json for the default target, / otherwise)")
	fs.StringVar(&cfg.Method, "method", d.Method, "request method; with -proto grpc, the RPC as package.Service/Method")
	f.readData = protoFlags(fs, cfg)
	f.pushLabels = pushFlags(fs, cfg)
	fs.StringVar(&f.bodyFile, "body", "", "`file` whose contents are sent as every request's body")
	f.maxBody = fs.Int64("max-body", limits.Body, "refuse a request body (-body, -data @file, a request file's body=@) over this many `bytes`")
	fs.Var(modeFlag{&cfg.ResultsMode}, "results-mode", "the results folder's permission `mode` in octal; its files get the same without execute (default 0700: the results name the target, its flags and its sites)")
	fs.IntVar(&cfg.Conns, "conns", 0, "connections kept across windows (default 8; 1 for the bulk drivers quic and udp)")
	fs.Float64Var(&cfg.Arrivals.Rate, "rate", 0, "open-loop load: send `R` requests per second on a clock, whatever the server answers, latency from each request's intended send time (http, https, h2c, h2, grpc; 0: closed loop, each connection sending when its last request answered)")
	fs.Func("rate-steps", "one open-loop run per `RATES` (requests per second, increasing, comma-separated: 1000,2000,4000): latency, CPU, allocations and off-CPU per request at each, and the knee (steps.json, report.md)", func(v string) (err error) {
		opt.rateSteps, err = parseRates(v)
		return err
	})
	fs.Var(arrivalsFlag{&cfg.Arrivals}, "arrivals", "with -rate: constant gaps, or poisson (exponential gaps of the same mean)")
	fs.StringVar(&cfg.Proto, "proto", d.Proto, "load driver: auto (by what the target answers, never its name: on UDP, udp for the bulk protocol, else quic; on TCP, http for HTTP/1.1, else grpc for gRPC reflection, else framed for a frame), http, https, h2c, h2, grpc, framed, quic or udp")
	fs.StringVar(&cfg.GRPCDriver, "grpc-driver", d.GRPCDriver, "gRPC driver: lean (HTTP/2 frames written and read directly, each call's status checked, nothing allocated per call) or grpcgo (grpc-go's client, the reference)")
	fs.StringVar(&cfg.HTTPDriver, "http-driver", d.HTTPDriver, "HTTP/1.1 and h2c driver: lean (requests serialized once, a small strict parser, nothing allocated per request: about 0.4x the CPU per request of net/http's client; h2c with one stream per connection) or nethttp (net/http's client, the reference)")
	fs.IntVar(&cfg.BodySize, "body-size", d.BodySize, "framed: request body size in bytes")
	fs.Int64Var(&cfg.Size, "size", d.Size, "quic, udp: bytes per transfer (a request is one whole transfer)")
	fs.IntVar(&cfg.Streams, "streams", d.Streams, "quic, h2c, h2: concurrent streams per connection")
	fs.IntVar(&cfg.Pkt, "pkt", d.Pkt, "udp: datagram size in bytes")
	fs.Var(&f.env, "env", "`KEY=VALUE` added to the target's environment (repeatable)")
	fs.Var(&f.headers, "header", "HTTP request header `K: V` (repeatable)")
	fs.DurationVar(&cfg.Warmup, "warmup", d.Warmup, "warm-up load before each window")
	fs.DurationVar(&cfg.Duration, "duration", d.Duration, "load in the timing window (rates, latency, CPU per request)")
	fs.DurationVar(&cfg.ExactDuration, "exact-duration", d.ExactDuration, "at most this much load in the windows that count or sample (attribution, copies, off-CPU, wall clock); 0: -duration")
	fs.StringVar(&cfg.Judge, "judge", "all", "what the exit code judges: all (exit 3 unless the window supports every figure) or counts (exit 0 when the counts are exact, though the timings are not judged: a CI gate on a shared or 2-core runner)")
	fs.StringVar(&cfg.CPUs, "cpus", d.CPUs, "pin `SERVER:LOAD` cpus (e.g. 0:1), auto (split the machine in halves) or none")
	fs.StringVar(&cfg.Out, "out", "", "results `dir` (default results/<UTC>_<commit>_<target>); never overwritten")
	fs.DurationVar(&cfg.ReadyTimeout, "ready-timeout", d.ReadyTimeout, "how long to wait for the target to listen")
	fs.StringVar(&cfg.Allocs, "allocs", d.Allocs, "allocation source: allocspy (runtime overlay) or heapprofile (MemProfileRate=1)")
	fs.BoolVar(&cfg.Instructions, "instructions", false, "count instructions per request under valgrind's callgrind instead; with -bench, instructions per op beside the other figures (needs valgrind, amd64)")
	fs.BoolVar(&cfg.Live, "live", false, "with -instructions: build the target as probe build does, its overlays idle unless -env configures live mode, to count what they cost (docs/live.md)")
	cfg.Requests = d.Requests
	fs.IntVar(&cfg.Sample, "sample", 0, "account one request in `N` of each route, as live mode does (the first of each included): figures per route only (docs/live.md); 0: every request")
	fs.IntVar(&cfg.MaxRoutes, "max-routes", 0, "the most distinct routes the target names (the rest are \"other\"); 0: 100")
	fs.BoolVar(&cfg.Alone, "alone", false, "with -requests FILE: also measure each request alone, in windows of its own (endpoints[]), beside the mix's per-route split")
	fs.Var(requestsFlag{cfg}, "requests", "a request `FILE` (METHOD PATH [weight=N] [header=\"K: V\"] [body=@FILE] per line; see docs/probe.md); a number N is, with -instructions, the requests in its window")
	fs.BoolVar(&cfg.Floor, "floor", false, "also measure targets/floor (a 2-byte response) and report CPU per request against it")
	fs.BoolVar(&cfg.OffCPU, "offcpu", d.OffCPU, "add the off-CPU window: execution trace, block and mutex profiles")
	fs.BoolVar(&cfg.Wallclock, "wallclock", d.Wallclock, "with -offcpu, add a wall-clock window: the agent's profile of every goroutine at 99 Hz")
	fs.BoolVar(&cfg.Retained, "retained", d.Retained, "add the retained window (with -bench, a run of its own): the heap its requests (ops) leave live after two GCs, by site, and the goroutines they leave running")
	f.bills = fs.Bool("bills", true, "in the attribution window, give requests bills of their own (allocations by site; one in N at random, up to 4095): the slowest 1% against the median (docs/bills.md)")
	f.fgprofOnly = fs.Bool("fgprof-only", false, "with -offcpu, fgprof in the wall-clock window and no off-CPU window (the reference of 'probe cost -what offcpu'; perfspy's own targets only)")
	fs.StringVar(&cfg.Syscalls, "syscalls", d.Syscalls, "syscall source: bpf (eBPF on sys_enter; /proc/PID/io when not root) or proc-io")
	fs.StringVar(&cfg.Copies, "copies", d.Copies, "copy counting: overlay (copyspy runtime overlay) or off")
	fs.Int64Var(&cfg.MinRequests, "min-requests", d.MinRequests, "fewer successful requests in a window make it not judged")
	bench := &opt.bench
	fs.StringVar(&bench.Bench, "bench", "", "measure the target package's Go benchmarks matching this `regexp` instead of a server, each in its timed region (see docs/bench.md)")
	fs.StringVar(&bench.BenchTime, "benchtime", "", "with -bench: go test's -benchtime, a duration or Nx")
	fs.DurationVar(&bench.Timeout, "bench-timeout", DefaultBenchTimeout, "with -bench: how long each run of the test binary may take; a benchmark still running then is stopped and named")
	fs.IntVar(&bench.Count, "count", DefaultBenchConfig().Count, "with -bench: go test's -count")
	f.execCmd = fs.String("exec", "", "run the target (with -bench, the test binaries) under `CMD`, as go test -exec does (e.g. qemu-aarch64-static, with GOARCH=arm64 in the environment)")
	return f
}

// cliOptions are what the flags give beside a run's Config: quiet, and
// the benchmark mode (-bench), whose options are its own.
type cliOptions struct {
	quiet bool
	bench BenchConfig // bench.Bench != "": probe run -bench, probe ab -bench
	// rateSteps, from -rate-steps: one open-loop run per rate.
	rateSteps []float64
}

// checkMode validates the mode the flags chose, once: the benchmark
// mode's options (taking the run flags it shares), or the run's.
func (opt *cliOptions) checkMode(cfg *Config, stderr io.Writer, name string) error {
	if len(opt.rateSteps) > 0 {
		switch {
		case cfg.Arrivals.Open():
			return errors.New("-rate-steps: not with -rate (each step is a rate)")
		case opt.bench.Bench != "":
			return errors.New("-rate-steps: not with -bench (benchmarks are not driven by a clock)")
		}
		// Each step is checked as the run it will be: a rate the window
		// cannot schedule is the flag's, -rate-steps.
		for _, rate := range opt.rateSteps {
			check := *cfg
			check.Arrivals.Rate = rate
			if _, err := check.check(); err != nil {
				return fmt.Errorf("-rate-steps: %w", err)
			}
		}
		return nil
	}
	if opt.bench.Bench == "" {
		cfg.Exec = opt.bench.Exec
		_, err := cfg.check()
		return err
	}
	b := &opt.bench
	b.Target, b.Out, b.Env, b.Syscalls, b.Copies, b.OffCPU, b.Retained, b.Instructions = cfg.Target, cfg.Out, cfg.Env, cfg.Syscalls, cfg.Copies, cfg.OffCPU, cfg.Retained, cfg.Instructions
	if b.Syscalls == "proc-io" {
		b.Syscalls = "off"
		fmt.Fprintf(stderr, "%s: -syscalls proc-io cannot see a benchmark's timed region; syscalls are not counted\n", name)
	}
	return b.check()
}

// readRunInputs reads what the flags name, once they are all parsed:
// the target's arguments, the store's labels and access, the request
// file, the gRPC message and the body (files within maxBody bytes). An
// error names its flag.
func readRunInputs(cfg *Config, targetArgs, bodyFile string, maxBody int64, pushLabels func() error, readData func(int64) error) error {
	var err error
	if cfg.Args, err = shellwords.Split(targetArgs); err != nil {
		return fmt.Errorf("-args: %w", err)
	}
	if err = pushLabels(); err != nil {
		return err
	}
	if err := readRequestFile(cfg, maxBody); err != nil {
		return fmt.Errorf("-requests: %w", err)
	}
	if err = readData(maxBody); err != nil {
		return fmt.Errorf("-data: %w", err)
	}
	if bodyFile != "" {
		if cfg.Body, err = load.ReadBody(bodyFile, maxBody); err != nil {
			return fmt.Errorf("-body: %w", err)
		}
	}
	switch {
	case len(cfg.Data) > 0 && bodyFile != "":
		return errors.New("-data and -body: give the request's body once (-body FILE, or -data TEXT or @FILE)")
	case len(cfg.Data) > 0 && cfg.RequestFile != "":
		return errors.New("-data: not with -requests, whose lines give each request's body (body=@FILE)")
	}
	return nil
}

func mainRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, opt, code, ok := parseRunFlags("probe run", args, stderr, nil)
	if !ok {
		return code
	}
	logw := opt.progress(stderr)
	if opt.bench.Bench != "" {
		return mainBench(ctx, cfg, opt.bench, logw, stdout, stderr)
	}
	if len(opt.rateSteps) > 0 {
		res, dir, err := RateSteps(ctx, cfg, opt.rateSteps, logw)
		if res != nil && dir != "" && len(res.Steps) > 0 {
			report.StepsTerminal(stdout, res, dir)
		}
		return exitCode(stderr, "probe run", err)
	}
	res, err := Run(ctx, cfg, logw)
	if res != nil {
		if merr := applyResultsMode(res.Dir, cfg.ResultsMode); merr != nil && err == nil {
			err = fmt.Errorf("-results-mode: %w", merr)
		}
	}
	// The verdict and the results folder are printed before any push, so
	// that a store that does not answer hides nothing.
	if res != nil && res.Summary.Verdict == VerdictCountsOnly {
		fmt.Fprintf(stdout, "%s  %s  %.2f instructions/req  [%s]\n  results       %s\n", res.Summary.Target, res.Summary.Commit,
			*res.Summary.PerRequest.Instructions, SourceInstructions, res.Dir)
	} else if res != nil {
		res.report().Terminal(stdout)
	}
	// A required push that failed fails the command (exit 1), even when
	// the run was not judged (exit 3): the verdict is printed either way.
	if res != nil && !errors.Is(err, ErrIncomplete) {
		perr := pushRun(cfg, res.Dir, stderr, func() error {
			return pushProfiles(ctx, cfg.Push, res.Dir, res.Summary, map[string]string{"endpoint": endpointLabel(cfg)})
		})
		if perr != nil && (err == nil || errors.Is(err, ErrNotJudged)) {
			err = perr
		}
	}
	return exitCode(stderr, "probe run", err)
}

// mainBench is probe run -bench: bc, validated when the flags were
// parsed; cfg has the store's flags.
func mainBench(ctx context.Context, cfg Config, bc BenchConfig, logw, stdout, stderr io.Writer) int {
	res, err := RunBench(ctx, bc, logw)
	if res != nil {
		if merr := applyResultsMode(res.Dir, cfg.ResultsMode); merr != nil && err == nil {
			err = fmt.Errorf("-results-mode: %w", merr)
		}
	}
	if res != nil {
		page := &report.Bench{Summary: res.Summary, Dir: res.Dir}
		if logw == nil { // -q
			page.TerminalQuiet(stdout)
		} else {
			page.Terminal(stdout)
		}
		perr := pushRun(cfg, res.Dir, stderr, func() error { return pushBench(ctx, cfg.Push, res.Dir, res.Summary, nil) })
		if perr != nil && err == nil {
			err = perr
		}
	}
	return exitCode(stderr, "probe run", err)
}

// pushRun sends a finished run's profiles (in dir) with send when -push
// asks; a failure is said, and is the command's error only with
// -push-required.
func pushRun(cfg Config, dir string, stderr io.Writer, send func() error) error {
	if cfg.Push.URL == "" {
		return nil
	}
	err := send()
	if err == nil {
		fmt.Fprintf(stderr, "probe run: pushed the profiles of %s to %s\n", dir, profstore.Redact(cfg.Push.URL))
		return nil
	}
	fmt.Fprintf(stderr, "probe run: %v; the results are in %s\n", err, dir)
	if cfg.Push.Required {
		return err
	}
	return nil
}

// exitCode maps a result to the exit codes and says why.
func exitCode(stderr io.Writer, name string, err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrNotJudged):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitNotJudged
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "%s: interrupted; the target was stopped\n", name)
		return ExitFailed
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return ExitFailed
}

// parseABFlags reads probe ab's flags into its options: the run's (or,
// with -bench, the benchmarks'), the revisions and the gates.
func parseABFlags(args []string, stderr io.Writer) (ab ABConfig, opt cliOptions, code int, ok bool) {
	var gates gateFlag
	cfg, opt, code, ok := parseRunFlags("probe ab", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&ab.Before, "before", "", "the `revision` to compare against")
		fs.StringVar(&ab.After, "after", "", "the `revision` under review")
		fs.StringVar(&ab.BeforeGo, "before-go", "", "the `toolchain` (GOTOOLCHAIN: go1.26.8) that builds the before arm; with -after-go and no revisions, one tree built by two toolchains")
		fs.StringVar(&ab.AfterGo, "after-go", "", "the `toolchain` (GOTOOLCHAIN: go1.27.3) that builds the after arm")
		fs.StringVar(&ab.Repo, "repo", "", "the git repository (default: the target's own)")
		fs.IntVar(&ab.Rounds, "rounds", defaultAB.Rounds, "runs per arm, interleaved ABBA...; 4 is the fewest that can reach p < 0.05")
		fs.StringVar(&ab.Control, "control", "", "an endpoint `path` whose figures must not change (else: machine moved, not judged)")
		fs.IntVar(&ab.Top, "top", defaultAB.Top, "function rows per profile")
		fs.Var(&gates, "max-regress", "`METRIC=PCT`: exit 1 when METRIC ("+strings.Join(metric.Compare("req"), ", ")+"; with -bench, "+strings.Join(metric.Compare("op"), ", ")+") regresses by more than PCT% (repeatable)")
	})
	if !ok {
		return ab, opt, code, false
	}
	ab.Out, cfg.Out, opt.bench.Out = cfg.Out, "", ""
	ab.Run, ab.Bench, ab.MaxRegress = cfg, opt.bench, gates.m
	for _, name := range slices.Sorted(maps.Keys(gates.m)) {
		switch {
		case ab.Bench.Bench != "" && !slices.Contains(benchUnits, name):
			fmt.Fprintf(stderr, "probe ab: -max-regress %s: unknown metric for benchmarks (want %s)\n", name, strings.Join(benchUnits, ", "))
			return ab, opt, ExitUsage, false
		case ab.Bench.Bench == "" && !slices.ContainsFunc(metricsFor(cfg), func(m abMetric) bool { return m.name == name }):
			fmt.Fprintf(stderr, "probe ab: -max-regress %s: unknown metric for this run (-instructions measures instructions/req only)\n", name)
			return ab, opt, ExitUsage, false
		}
	}
	if (ab.BeforeGo == "") != (ab.AfterGo == "") {
		fmt.Fprintln(stderr, "probe ab: -before-go and -after-go go together")
		return ab, opt, ExitUsage, false
	}
	for _, c := range [][2]string{{"-before-go", ab.BeforeGo}, {"-after-go", ab.AfterGo}} {
		if err := gorelease.CheckToolchain(c[0], c[1]); c[1] != "" && err != nil {
			fmt.Fprintf(stderr, "probe ab: %v\n", err)
			return ab, opt, ExitUsage, false
		}
	}
	if (ab.Before == "" || ab.After == "") && (ab.BeforeGo == "" || ab.Before != ab.After) {
		fmt.Fprintln(stderr, "probe ab: -before and -after are required (or -before-go and -after-go, to compare two toolchains on one tree)")
		return ab, opt, ExitUsage, false
	}
	return ab, opt, 0, true
}

// defaultAB are probe ab's own defaults: 4 rounds per arm, the fewest
// that can reach p < 0.05, and 10 function rows per profile.
var defaultAB = ABConfig{Rounds: 4, Top: 10}

// NewABConfig is probe ab's configuration for target as the flags'
// defaults make it (DefaultConfig, DefaultBenchConfig; with bench, the
// benchmark mode's for that pattern), checked as the command checks it,
// no revisions set: a front (probe review) sets the rest as typed fields
// and reads its inputs with Config.ReadInputs.
func NewABConfig(target, bench string) (ABConfig, error) {
	ab := defaultAB
	ab.Run = DefaultConfig()
	ab.Run.Target = target
	if bench == "" {
		_, err := ab.Run.check()
		return ab, err
	}
	b := DefaultBenchConfig()
	b.Target, b.Bench = target, bench
	b.Syscalls, b.Copies, b.OffCPU, b.Retained = ab.Run.Syscalls, ab.Run.Copies, ab.Run.OffCPU, ab.Run.Retained
	ab.Bench = b
	return ab, ab.Bench.check()
}

// RunInputs are what a front gives as probe run's -args, -requests and
// -data.
type RunInputs struct{ Args, Requests, Data string }

// ReadInputs reads in into c as those flags do: the arguments split as a
// shell would, the request file and the message (JSON, or @file), files
// within -max-body's default. An error names the flag's part.
func (c *Config) ReadInputs(in RunInputs) error {
	var err error
	if c.Args, err = shellwords.Split(in.Args); err != nil {
		return fmt.Errorf("args: %w", err)
	}
	if in.Requests != "" {
		if err := (requestsFlag{c}).Set(in.Requests); err != nil {
			return fmt.Errorf("requests: %w", err)
		}
		if err := readRequestFile(c, limits.Body); err != nil {
			return fmt.Errorf("requests: %w", err)
		}
	}
	if f, ok := strings.CutPrefix(in.Data, "@"); ok {
		if c.Data, err = load.ReadBody(f, limits.Body); err != nil {
			return fmt.Errorf("data: %w", err)
		}
	} else if in.Data != "" {
		c.Data = []byte(in.Data)
	}
	return nil
}

// ABConfigFromArgs reads probe ab's arguments as the command does, for a
// front (probe review) that drives probe ab from a file: the error is what
// the command would print.
func ABConfigFromArgs(args []string) (ABConfig, error) {
	var e bytes.Buffer
	ab, _, _, ok := parseABFlags(args, &e)
	if !ok {
		return ab, errors.New(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(e.String()), "probe ab: ")))
	}
	return ab, nil
}

func mainAB(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ab, opt, code, ok := parseABFlags(args, stderr)
	if !ok {
		return code
	}
	logw := opt.progress(stderr)
	res, err := AB(ctx, ab, logw)
	if res != nil {
		if merr := applyResultsMode(res.Dir, ab.Run.ResultsMode); merr != nil && err == nil {
			err = fmt.Errorf("-results-mode: %w", merr)
		}
		b, _ := os.ReadFile(filepath.Join(res.Dir, "report.md"))
		stdout.Write(b)
		fmt.Fprintf(stdout, "\nresults: %s\n", res.Dir)
	}
	if errors.Is(err, ErrRegression) {
		fmt.Fprintf(stderr, "probe ab: %v\n", err)
		return ExitFailed
	}
	return exitCode(stderr, "probe ab", err)
}

// parseBulkFlags reads probe bulk's flags: the run's, the transfer sizes
// and the rounds; windows are 2 s unless -duration says otherwise.
func parseBulkFlags(args []string, stderr io.Writer) (sw SweepConfig, opt cliOptions, code int, ok bool) {
	var sizes string
	cfg, opt, code, ok := parseRunFlags("probe bulk", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&sizes, "sizes", "1K,64K,1M,2M", "transfer `sizes`, bytes or K or M, comma-separated")
		fs.IntVar(&sw.Rounds, "rounds", 3, "rounds per size and mode; the first is dropped")
	})
	if !ok {
		return sw, opt, code, false
	}
	var err error
	if sw.Sizes, err = parseSizes(sizes); err != nil {
		fmt.Fprintf(stderr, "probe bulk: -sizes: %v\n", err)
		return sw, opt, ExitUsage, false
	}
	if sw.Rounds < 2 {
		fmt.Fprintf(stderr, "probe bulk: -rounds %d: the first round is dropped, so at least 2\n", sw.Rounds)
		return sw, opt, ExitUsage, false
	}
	if !slices.Contains(cfg.Flags, "-duration="+cfg.Duration.String()) {
		cfg.Duration = 2 * time.Second // many runs: shorter windows unless asked
	}
	sw.Out, cfg.Out = cfg.Out, ""
	sw.Run = cfg
	return sw, opt, 0, true
}

func mainBulk(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sw, opt, code, ok := parseBulkFlags(args, stderr)
	if !ok {
		return code
	}
	logf := func(format string, a ...any) {
		if !opt.quiet {
			fmt.Fprintf(stderr, "probe bulk: "+format+"\n", a...)
		}
	}
	res, err := Sweep(ctx, sw, logf)
	if res != nil {
		if merr := applyResultsMode(res.Dir, sw.Run.ResultsMode); merr != nil && err == nil {
			err = fmt.Errorf("-results-mode: %w", merr)
		}
		b, _ := os.ReadFile(filepath.Join(res.Dir, "report.md"))
		stdout.Write(b)
		fmt.Fprintf(stdout, "\nresults: %s\n", res.Dir)
	}
	return exitCode(stderr, "probe bulk", err)
}

// requestsFlag is -requests: a request file, or (a number) the requests
// of an -instructions window.
type requestsFlag struct{ cfg *Config }

func (f requestsFlag) String() string {
	if f.cfg == nil {
		return ""
	}
	if f.cfg.RequestFile != "" {
		return f.cfg.RequestFile
	}
	return strconv.Itoa(f.cfg.Requests)
}

func (f requestsFlag) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil {
		if _, statErr := os.Stat(v); statErr != nil {
			if n <= 0 {
				return fmt.Errorf("want a positive count or a request file, got %q", v)
			}
			f.cfg.Requests = n
			return nil
		}
	}
	if _, err := os.Stat(v); err != nil {
		return err
	}
	f.cfg.RequestFile = v // read once every flag is parsed (-max-body)
	return nil
}

// readRequestFile reads -requests FILE, bodies within maxBody bytes.
func readRequestFile(cfg *Config, maxBody int64) error {
	if cfg.RequestFile == "" {
		return nil
	}
	fh, err := limits.OpenRegular(cfg.RequestFile)
	if err != nil {
		return fmt.Errorf("-requests: %w", err)
	}
	defer fh.Close()
	cfg.Mix, err = load.ParseRequests(fh, cfg.RequestFile, filepath.Dir(cfg.RequestFile), maxBody)
	return err
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// pushFlags adds -push, -label and -push-required; the function it
// returns sets the labels once the flags are parsed.
func pushFlags(fs *flag.FlagSet, cfg *Config) func() error {
	var labels envFlag
	fs.StringVar(&cfg.Push.URL, "push", "", "send every profile of the run to the Pyroscope server at this `URL` (http://host:port or https://host:port), labeled; credentials from "+profstore.EnvToken+" or "+profstore.EnvBasic+" (docs/fleet.md)")
	fs.Var(&labels, "label", "`K=V` added to the pushed profiles' labels (repeatable)")
	fs.BoolVar(&cfg.Push.Required, "push-required", false, "exit 1 when the push fails (the results are kept either way)")
	cfg.Push.Access.AddFlags(fs)
	return func() error {
		if err := cfg.Push.Access.FromEnv(os.Getenv); err != nil {
			return err
		}
		if cfg.Push.URL != "" {
			if err := cfg.Push.Access.Check(cfg.Push.URL); err != nil {
				return fmt.Errorf("-push: %w", err)
			}
		}
		for _, kv := range labels.kv {
			k, v, _ := strings.Cut(kv, "=")
			if n := profstore.LabelName(k); n == "service_name" || strings.HasPrefix(n, "__") {
				return fmt.Errorf("-label %q: %s is the store's own (the service is the target's name)", kv, n)
			}
			if cfg.Push.Labels == nil {
				cfg.Push.Labels = map[string]string{}
			}
			// Named as the store names them, once: two spellings of one
			// name (git-ref, git_ref) are one label, the later flag's.
			cfg.Push.Labels[profstore.LabelName(k)] = v
		}
		return nil
	}
}

// protoFlags adds the gRPC and TLS flags; the function it returns reads
// -data (JSON as given, or @file) once the flags are parsed.
func protoFlags(fs *flag.FlagSet, cfg *Config) func(maxBody int64) error {
	var data string
	fs.StringVar(&data, "data", "", "the requests' body as given, or @file (http, https, h2c, h2); with -proto grpc, the request message as JSON")
	var protoFiles, importPaths listFlag
	fs.Var(&protoFiles, "proto-file", "-proto grpc: a .proto `FILE` describing the service, for a server without reflection (repeatable)")
	fs.Var(&importPaths, "import-path", "-proto-file: a `DIR` to find imports in (repeatable; default: each file's folder)")
	fs.StringVar(&cfg.CACert, "cacert", "", "https, h2: verify the server's certificate against this PEM `file`")
	fs.BoolVar(&cfg.Insecure, "insecure", false, "https, h2: do not verify the server's certificate (the report says so)")
	return func(maxBody int64) error {
		cfg.ProtoFiles, cfg.ImportPaths = protoFiles, importPaths
		if f, ok := strings.CutPrefix(data, "@"); ok {
			b, err := load.ReadBody(f, maxBody)
			cfg.Data = b
			return err
		}
		if data != "" {
			cfg.Data = []byte(data)
		}
		return nil
	}
}

// gateFlag collects -max-regress METRIC=PCT flags.
type gateFlag struct{ m map[string]float64 }

func (g *gateFlag) String() string { return "" }

func (g *gateFlag) Set(v string) error {
	name, pct, ok := strings.Cut(v, "=")
	f, err := strconv.ParseFloat(strings.TrimSuffix(pct, "%"), 64)
	if !ok || err != nil || f < 0 {
		return fmt.Errorf("want METRIC=PCT, e.g. allocs/req=1%%, got %q", v)
	}
	if g.m == nil {
		g.m = map[string]float64{}
	}
	g.m[name] = f
	return nil
}

// envFlag collects -env KEY=VALUE flags.
type envFlag struct{ kv []string }

func (e *envFlag) String() string { return strings.Join(e.kv, " ") }

func (e *envFlag) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	e.kv = append(e.kv, v)
	return nil
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
	return strings.Join(slices.Sorted(slices.Values(s)), ", ")
}

func (h *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want K: V, got %q", profstore.RedactHeader(v))
	}
	if err := load.CheckHeader(strings.TrimSpace(k), val); err != nil {
		return err
	}
	if h.m == nil {
		h.m = map[string]string{}
	}
	h.m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	return nil
}

// recordedFlags is every flag set, as meta records it: the values of
// flags that carry secrets (headers, the target's environment, the
// target's arguments that look like credentials, a URL's userinfo) are
// redacted, their names kept.
func recordedFlags(fs *flag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		out = append(out, "-"+f.Name+"="+redactFlag(f.Name, f.Value.String()))
	})
	return out
}

// arrivalsFlag is -arrivals: constant or poisson.
type arrivalsFlag struct{ a *load.Arrivals }

func (f arrivalsFlag) String() string {
	if f.a != nil && f.a.Poisson {
		return "poisson"
	}
	return "constant"
}

func (f arrivalsFlag) Set(v string) error {
	switch v {
	case "constant":
		f.a.Poisson = false
	case "poisson":
		f.a.Poisson = true
	default:
		return fmt.Errorf("want constant or poisson, not %q", v)
	}
	return nil
}

// configFlags are the flags that would give cfg, for meta, when it was
// made by a program (probe review) rather than parsed: each flag bound to
// a field of Config whose value differs from its default, redacted as
// recordedFlags does. -args and the environment have lines of their own.
func configFlags(cfg Config) []string {
	var cur Config
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	defineRunFlags(fs, &cur, &cliOptions{})
	cur = cfg // the flags point into cur: they read cfg's values now
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if v := f.Value.String(); v != f.DefValue {
			out = append(out, "-"+f.Name+"="+redactFlag(f.Name, v))
		}
	})
	return out
}

func redactFlag(name, value string) string {
	switch name {
	case "header", "push-header":
		var parts []string
		for _, h := range strings.Split(value, ", ") {
			parts = append(parts, profstore.RedactHeader(h))
		}
		return strings.Join(parts, ", ")
	case "env":
		var parts []string
		for _, kv := range strings.Fields(value) {
			k, _, _ := strings.Cut(kv, "=")
			parts = append(parts, k+"=REDACTED")
		}
		return strings.Join(parts, " ")
	case "push", "path":
		return profstore.Redact(value)
	case "data":
		// Now the HTTP body too (a login form, a token in JSON): its
		// file's name is kept, text given inline is not.
		if strings.HasPrefix(value, "@") {
			return value
		}
		return fmt.Sprintf("REDACTED (%d bytes)", len(value))
	case "args":
		words, err := shellwords.Split(value)
		if err != nil {
			return "REDACTED (unparsable)"
		}
		return strings.Join(RedactArgs(words), " ")
	}
	return value
}

// RedactArgs hides the values of a target's arguments that look like
// credentials (--token=x, -password x, a URL's userinfo).
func RedactArgs(args []string) []string {
	words := slices.Clone(args)
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.Contains(w, "://") {
			words[i] = profstore.Redact(w)
			continue
		}
		name, _, eq := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !strings.HasPrefix(w, "-") || !profstore.SensitiveName(name) {
			continue
		}
		if eq {
			words[i] = w[:strings.Index(w, "=")+1] + "REDACTED"
		} else if i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
			words[i+1] = "REDACTED"
			i++
		}
	}
	return words
}

// modeFlag is -results-mode: an octal permission mode.
type modeFlag struct{ m *os.FileMode }

func (f modeFlag) String() string {
	if f.m == nil || *f.m == 0 {
		return "0700"
	}
	return fmt.Sprintf("%04o", uint32(*f.m))
}

func (f modeFlag) Set(v string) error {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o777 || n&0o700 != 0o700 {
		return fmt.Errorf("want an octal mode from 0700 to 0777 (the owner keeps rwx), got %q", v)
	}
	*f.m = os.FileMode(n)
	return nil
}

// parseBisectFlags reads probe bisect's flags: the run's (or -bench's),
// the two revisions and the metric. Its windows count, they do not time:
// unless the flags say otherwise, 1 s of load, no off-CPU, retained or
// bills window.
func parseBisectFlags(args []string, stderr io.Writer) (bc BisectConfig, opt cliOptions, code int, ok bool) {
	cfg, opt, code, ok := parseRunFlags("probe bisect", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&bc.Good, "good", "", "a `revision` whose figure is the one before the change")
		fs.StringVar(&bc.Bad, "bad", "", "a later `revision` whose figure changed")
		fs.StringVar(&bc.Metric, "metric", "", "the exact count to follow: allocs/req, B/req or copied-B/req; with -bench allocs/op, B/op or copied-B/op (default allocs/req, allocs/op)")
		fs.StringVar(&bc.Repo, "repo", "", "the git repository (default: the target's own)")
	})
	if !ok {
		return bc, opt, code, false
	}
	given := func(name string) bool {
		return slices.ContainsFunc(cfg.Flags, func(f string) bool { return strings.HasPrefix(f, "-"+name+"=") })
	}
	if !given("duration") {
		cfg.Duration = time.Second
	}
	if !given("offcpu") {
		cfg.OffCPU = false
	}
	if !given("retained") {
		cfg.Retained = false
	}
	if !given("bills") {
		cfg.NoBills = true
	}
	if bc.Metric == "" {
		bc.Metric = metric.AllocsReq
		if opt.bench.Bench != "" {
			bc.Metric = metric.AllocsOp
		}
	}
	if bc.Good == "" || bc.Bad == "" {
		fmt.Fprintln(stderr, "probe bisect: -good and -bad are required")
		return bc, opt, ExitUsage, false
	}
	if _, known := bisectMetrics[bc.Metric]; !known {
		fmt.Fprintf(stderr, "probe bisect: -metric %s: want an exact count: %s\n", bc.Metric, strings.Join(slices.Sorted(maps.Keys(bisectMetrics)), ", "))
		return bc, opt, ExitUsage, false
	}
	if (opt.bench.Bench != "") != strings.HasSuffix(bc.Metric, "/op") {
		fmt.Fprintf(stderr, "probe bisect: -metric %s: a server's figures are .../req, -bench's .../op\n", bc.Metric)
		return bc, opt, ExitUsage, false
	}
	bc.Out, cfg.Out, opt.bench.Out = cfg.Out, "", ""
	opt.bench.Retained, opt.bench.OffCPU = false, false
	bc.Run, bc.Bench = cfg, opt.bench
	return bc, opt, 0, true
}

func mainBisect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	bc, opt, code, ok := parseBisectFlags(args, stderr)
	if !ok {
		return code
	}
	logw := opt.progress(stderr)
	res, err := Bisect(ctx, bc, logw)
	if res != nil {
		if merr := applyResultsMode(res.Dir, bc.Run.ResultsMode); merr != nil && err == nil {
			err = fmt.Errorf("-results-mode: %w", merr)
		}
		WriteBisectReport(stdout, res)
		fmt.Fprintf(stdout, "\nresults: %s\n", res.Dir)
	}
	return exitCode(stderr, "probe bisect", err)
}

// progress is where a command's progress lines go: stderr, or nowhere
// with -q.
func (o cliOptions) progress(stderr io.Writer) io.Writer {
	if o.quiet {
		return nil
	}
	return stderr
}
