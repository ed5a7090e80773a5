package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/elfsym"
	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/load"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/routes"
	"github.com/perfspy/perfspy/syscalls"
	"github.com/perfspy/perfspy/wirefmt/bulk"

	"github.com/perfspy/perfspy/internal/proc"

	"github.com/perfspy/perfspy/internal/withagent"

	"github.com/perfspy/perfspy/allocspy"

	"github.com/perfspy/perfspy/benchwin"

	"github.com/perfspy/perfspy/offcpu"
	"github.com/perfspy/perfspy/schema"
)

// DefaultTarget is what probe run measures when no target is named.
const DefaultTarget = withagent.DefaultTarget

// Config is one probe run, in named parts, each embedded so that its
// fields read as the run's (cfg.Warmup): the load driver's spec, the
// target, the windows, how figures are counted, and where they go.
// DefaultConfig is the flags' defaults; zero fields where zero means
// nothing get them too.
type Config struct {
	load.Spec
	TargetConfig
	WindowConfig
	CountConfig
	OutputConfig
}

// TargetConfig is the target: what it is, how it is built and started.
type TargetConfig struct {
	Target string
	// Dir is the folder the target runs in ("" probe's own); probe ab
	// runs each arm in its worktree.
	Dir string
	// Toolchain is GOTOOLCHAIN for the target's build ("" the environment's:
	// the one go build would use); probe ab -before-go and -after-go set it.
	Toolchain string
	Args      []string // passed to the target
	// Exec runs the target under a program, as go test -exec runs test
	// binaries: Exec[0] with Exec[1:], the binary and its arguments (an
	// emulator for a GOARCH this machine does not run).
	Exec []string
	Addr string // override the discovered address
	// Env is added to the target's environment, KEY=VALUE each.
	Env          []string
	ReadyTimeout time.Duration
	CPUs         string // auto, none or SERVER:LOAD
}

// WindowConfig is the windows: their load, and which are opened.
type WindowConfig struct {
	Warmup   time.Duration
	Duration time.Duration
	// ExactDuration bounds the load of the windows after the timing
	// window (attribution, copies, off-CPU, wall clock): counts need
	// requests, not time. 0 is Duration.
	ExactDuration time.Duration
	MinRequests   int64 // fewer successes than this in a window: not judged
	// OffCPU adds the off-CPU window: an execution trace, block and mutex
	// profiles, and (with Wallclock) the agent's wall-clock profile.
	OffCPU    bool
	Wallclock bool
	// FgprofOnly makes fgprof the wall-clock profiler and leaves the
	// execution trace out of the off-CPU window (-fgprof-only): the
	// reference that probe cost sets against the trace (perfspy's
	// targets only).
	FgprofOnly bool
	// Retained adds the retained window: what the requests leave behind
	// (heap still live after two GCs, goroutines still running).
	Retained bool
	// Floor also measures targets/floor, the minimal server, with the same
	// settings, and reports the target's CPU per request against it.
	Floor bool
	// Instructions measures instructions per request under callgrind
	// instead of the usual windows; Requests bounds its load (default 2000).
	Instructions bool
	Requests     int
	// Live, with Instructions, builds the target as probe build does
	// (allocspy, copyspy, the request marks and live mode), so that the
	// window counts what those cost per request; Env configures them.
	Live bool
	// RequestFile is -requests FILE, whose requests are Spec.Mix; each is
	// also measured in windows of its own (Summary.Endpoints).
	RequestFile string
	// Alone measures each request of a request file alone too, in
	// windows of its own, after the mix (-alone).
	Alone bool
}

// CountConfig is how the figures are counted.
type CountConfig struct {
	Copies   string // copy counting: overlay (default) or off
	Allocs   string // allocation source: allocspy (default) or heapprofile
	Syscalls string // syscall source: bpf (default; falls back to proc-io when not root) or proc-io
	// MaxRoutes caps the distinct routes the target names (-max-routes;
	// the rest are "other"); 0 is the target's default (100).
	MaxRoutes int
	// Sample is N when one request in N of each route is accounted
	// (-sample: PERFSPY_SAMPLE, live mode's sampling); 0 accounts all.
	Sample int
	// NoBills leaves the requests' own bills out of the attribution
	// window (-bills=false).
	NoBills bool
}

// OutputConfig is where the results go.
type OutputConfig struct {
	Out string // results folder; default results/<UTC>_<commit>_<target>
	// ResultsMode is the results folder's permission mode (its files get
	// it without execute); 0 is 0700.
	ResultsMode os.FileMode
	Flags       []string // every flag as given, for meta (secrets redacted)
	// Push sends the run's profiles to a profile store (-push).
	Push PushConfig
	// Judge is what the exit code judges (-judge): "all" (default: exit 3
	// unless the window supports every figure) or "counts" (exit 0 when
	// the counts are judged, whatever the timings: a CI gate on a shared
	// or 2-core runner).
	Judge string
}

// DefaultConfig is probe run's configuration as its flags' defaults make
// it (the flags take their defaults from it): a program that drives probe
// starts from it and sets what it changes, as probe review does. A zero
// Config is filled with the same defaults where zero means nothing, but
// its windows and switches are zero.
func DefaultConfig() Config {
	return Config{
		Spec:         load.Spec{Proto: "auto", HTTPDriver: "lean", GRPCDriver: "lean", Method: "GET", BodySize: 1024, Size: 1 << 20, Streams: 1, Pkt: 1252},
		TargetConfig: TargetConfig{CPUs: "auto", ReadyTimeout: 60 * time.Second},
		WindowConfig: WindowConfig{Warmup: time.Second, Duration: 3 * time.Second, ExactDuration: time.Second, MinRequests: 100,
			OffCPU: true, Wallclock: true, Retained: true, Requests: 2000},
		CountConfig:  CountConfig{Copies: "overlay", Allocs: "allocspy", Syscalls: "bpf"},
		OutputConfig: OutputConfig{Judge: "all", Push: PushConfig{Access: storeaccess.Access{Timeout: storeaccess.DefaultTimeout, MaxResponse: storeaccess.DefaultMaxResponse}}},
	}
}

// check fills the defaults of cfg's zero fields and validates it,
// returning the CPU plan of -cpus: the command reports its errors as
// usage errors before the build, and Run checks the Config it is given
// the same way (both steps are idempotent).
func (cfg *Config) check() (proc.CPUPlan, error) {
	cfg.withDefaults()
	return cfg.validate()
}

// choices are the flags with a fixed set of values; the first is the
// default.
func (cfg *Config) choices() []struct {
	flag  string
	v     *string
	valid []string
} {
	return []struct {
		flag  string
		v     *string
		valid []string
	}{
		{"copies", &cfg.Copies, []string{"overlay", "off"}},
		{"judge", &cfg.Judge, []string{"all", "counts"}},
		{"allocs", &cfg.Allocs, []string{"allocspy", "heapprofile"}},
		{"syscalls", &cfg.Syscalls, []string{"bpf", "proc-io", "off"}},
		{"proto", &cfg.Proto, load.Protos},
		{"http-driver", &cfg.HTTPDriver, []string{"lean", "nethttp"}},
		{"grpc-driver", &cfg.GRPCDriver, []string{"lean", "grpcgo"}},
	}
}

// withDefaults fills cfg's zero fields with the flags' defaults.
func (cfg *Config) withDefaults() {
	if cfg.Target == "" {
		cfg.Target = DefaultTarget
	}
	if cfg.Path == "" {
		cfg.Path = "/"
		if cfg.Target == DefaultTarget {
			cfg.Path = "/json"
		}
	}
	if cfg.Size == 0 {
		cfg.Size = 1 << 20
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	if cfg.CPUs == "" {
		cfg.CPUs = "auto"
	}
	for _, c := range cfg.choices() {
		if *c.v == "" {
			*c.v = c.valid[0]
		}
	}
}

// validate says what in cfg cannot run; it changes nothing (a value
// receiver).
func (cfg Config) validate() (proc.CPUPlan, error) {
	if err := cfg.validateLoad(); err != nil {
		return proc.CPUPlan{}, err
	}
	if cfg.Out != "" {
		if _, err := os.Lstat(cfg.Out); err == nil {
			return proc.CPUPlan{}, fmt.Errorf("-out %s: already exists; probe never overwrites a results folder", cfg.Out)
		}
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return proc.CPUPlan{}, fmt.Errorf("-env %q: want KEY=VALUE", kv)
		}
	}
	if cfg.Sample < 0 || cfg.Sample > 1<<20 {
		return proc.CPUPlan{}, fmt.Errorf("-sample %d: want 1 to %d (0: every request)", cfg.Sample, 1<<20)
	}
	if err := cfg.validatePaths(); err != nil {
		return proc.CPUPlan{}, err
	}
	if err := checkAddr(cfg.Addr); err != nil {
		return proc.CPUPlan{}, err
	}
	if cfg.Arrivals.Open() && cfg.Instructions {
		return proc.CPUPlan{}, errors.New("-rate: not with -instructions, whose load is paced one request at a time")
	}
	if cfg.Live && !cfg.Instructions {
		return proc.CPUPlan{}, errors.New("-live: only with -instructions (probe build makes the live binary; docs/live.md)")
	}
	if cfg.MaxRoutes < 0 || cfg.MaxRoutes > routes.MaxRoutes {
		return proc.CPUPlan{}, fmt.Errorf("-max-routes %d: want 1 to %d (0: the default, %d)", cfg.MaxRoutes, routes.MaxRoutes, routes.DefaultMaxRoutes)
	}
	for _, c := range cfg.choices() {
		if !slices.Contains(c.valid, *c.v) {
			return proc.CPUPlan{}, fmt.Errorf("-%s %q: want %s", c.flag, *c.v, strings.Join(c.valid, " or "))
		}
	}
	plan, err := proc.ParseCPUs(cfg.CPUs, runtime.NumCPU())
	if err != nil {
		return proc.CPUPlan{}, fmt.Errorf("-cpus: %w", err)
	}
	return plan, nil
}

// validatePaths checks, before any build, the paths the run will use
// after it: -out's folder and -exec's program (load's Spec.Check the
// driver's files).
func (cfg Config) validatePaths() error {
	if cfg.Out != "" {
		parent := filepath.Dir(filepath.Clean(cfg.Out))
		if st, err := os.Stat(parent); err != nil || !st.IsDir() {
			return fmt.Errorf("-out %s: its folder %s does not exist (probe makes the results folder, not the folders above it)", cfg.Out, parent)
		}
	}
	if len(cfg.Exec) > 0 {
		if _, err := exec.LookPath(cfg.Exec[0]); err != nil {
			return fmt.Errorf("-exec %s: %w", cfg.Exec[0], err)
		}
	}
	return nil
}

// validateLoad checks the windows' flags, and the load driver's spec
// (load.Spec.Check: every combination of them, once).
func (cfg Config) validateLoad() error {
	switch {
	case cfg.Duration <= 0 && !cfg.Instructions:
		return fmt.Errorf("-duration %v: must be positive", cfg.Duration)
	case cfg.Warmup < 0:
		return fmt.Errorf("-warmup %v: must not be negative", cfg.Warmup)
	case cfg.ExactDuration < 0:
		return fmt.Errorf("-exact-duration %v: must not be negative", cfg.ExactDuration)
	case cfg.ReadyTimeout < 0:
		return fmt.Errorf("-ready-timeout %v: must be positive", cfg.ReadyTimeout)
	case cfg.MinRequests < 0:
		return fmt.Errorf("-min-requests %d: must not be negative", cfg.MinRequests)
	}
	return cfg.Spec.Check(cfg.Duration)
}

// ErrNotJudged is returned, with the files written, when the window cannot
// support a verdict. Commands exit 3 on it.
var ErrNotJudged = errors.New("not judged")

// Result is what Run produced.
type Result struct {
	Dir       string
	Summary   *schema.Summary
	Sites     []report.Site     // allocation sites of the attribution window
	CopySites []schema.CopySite // copy sites of the attribution window
}

// report is what the terminal table is made of.
func (r *Result) report() *report.Run {
	return &report.Run{Summary: r.Summary, Dir: r.Dir, Sites: r.Sites, CopySites: r.CopySites}
}

// windowResult is one window's raw measurements.
type windowResult struct {
	load      *load.Result
	cpu       uint64 // target CPU ns inside the window
	runqWait  uint64 // ns the target's threads waited in a run queue inside the window
	machine   proc.MachineWindow
	cpuSource string
	io0, io1  proc.IOReading
	ioOK      bool             // both /proc/PID/io readings were had (not on macOS)
	udp       map[string]int64 // the machine's UDP counters' change (/proc/net/snmp)
	m0, m1    *wire.Metrics
	sys       map[int]uint64 // syscalls by number in the window, when counted with eBPF
	sysSites  []syscalls.Site
	driverCPU uint64 // the load driver's CPU ns inside the window (probe's own)
	childCPU  uint64 // the target's child processes' CPU ns inside the window
	// tags are the driver's latencies keyed by request (a window with
	// bills, a driver that keys them: load.Tagger)
	tags []load.Tag
}

// spyOverlays are the measuring packages' overlays for the build, or the
// tests' stand-ins.
func spyOverlays(s seams) withagent.Overlays {
	ov := withagent.Overlays{Copies: copyspy.Overlay, Allocs: allocspy.Overlay, Requests: offcpu.Overlay,
		Bench: func(goroot, dir string, copies bool) (map[string]string, error) {
			tables := []benchwin.Table{benchwin.Allocs}
			if copies {
				tables = append(tables, benchwin.Copies)
			}
			return benchwin.Overlay(goroot, dir, tables...)
		}}
	if s.copyOverlay != nil {
		ov.Copies = s.copyOverlay
	}
	if s.allocOverlay != nil {
		ov.Allocs = s.allocOverlay
	}
	return ov
}

// internals are a run's settings that are probe's own, never the user's:
// the timing window alone (the floor's runs, probe bulk's), and the tests'
// stand-ins.
type internals struct {
	timingOnly bool
	seams      seams
}

// seams are what tests hand a run to play another machine or Go
// release; nil fields are the real ones.
type seams struct {
	copyOverlay  func(goroot, goarch, dir string) (map[string]string, error)
	allocOverlay func(goroot, goarch, goexp, dir string) (map[string]string, error)
	syscallsOpen func(pid int) (*syscalls.Counter, error) // a machine without eBPF
	// attributionCPUProfile keeps the CPU profiler on in the attribution
	// window too, so that signals arrive while the recorders run.
	attributionCPUProfile bool
	// crossCheck runs the heap profile beside allocspy in the attribution
	// window and keeps it as allocs-heapprofile.pb.gz: the tests' oracle.
	crossCheck bool
}

// sysCounter is the eBPF syscall counter of a run and what symbolizes its
// stacks; nil when not root (then /proc/PID/io is the source).
type sysCounter struct {
	c   *syscalls.Counter
	sym *elfsym.Table
}

// Run builds the target, measures a clean window and an attribution window,
// and writes the results folder. logw receives progress; nil is quiet.
func Run(ctx context.Context, cfg Config, logw io.Writer) (*Result, error) {
	return run(ctx, cfg, internals{}, logw)
}

// run is Run with probe's own settings.
func run(ctx context.Context, cfg Config, in internals, logw io.Writer) (*Result, error) {
	logf := func(format string, a ...any) {
		if logw != nil {
			fmt.Fprintf(logw, "probe: "+format+"\n", a...)
		}
	}
	plan, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if cfg.Instructions {
		return runInstructions(ctx, cfg, plan, logf)
	}
	// Every runtime overlay is built in whatever the flags count: one
	// build (and one standard library built with the overlays) serves
	// every mode, and an overlay the run does not use stays idle, as all
	// of them are in the timing window.
	tgt, err := withagent.Build(ctx, cfg.Target, withagent.BuildOptions{Toolchain: cfg.Toolchain, Copies: true, Allocs: true, Wallclock: cfg.OffCPU && cfg.Wallclock && !cfg.FgprofOnly, FgprofRef: cfg.OffCPU && cfg.FgprofOnly, Requests: true,
		Overlays: spyOverlays(in.seams)}, logf)
	if err != nil {
		return nil, err
	}
	tgt = idleOverlays(tgt, cfg.Copies == "off", cfg.Allocs != "allocspy")
	if err := (BenchConfig{Exec: cfg.Exec}).checkArch(tgt); err != nil {
		return nil, err
	}
	s, err := startSession(ctx, cfg, in, plan, tgt, logf)
	if err != nil {
		return nil, err
	}
	defer s.close()
	win, raw, err := s.windows(ctx)
	if err != nil {
		return nil, err
	}
	s.p.Stop()
	floor, err := s.floor(ctx, win.clean.load)
	if err != nil {
		return nil, err
	}
	logf("writing %s", s.out)
	res, err := writeResults(&runOutput{ses: s, win: win, raw: raw, timing: s.reasons, floor: floor})
	if errors.Is(err, ErrIncomplete) {
		return res, err // the verdict, with what was not written
	}
	if err != nil {
		return nil, err
	}
	if err := cfg.judgeExit(res.Summary); err != nil {
		return res, err
	}
	return res, nil
}

// judgeExit is a run's ErrNotJudged, or nil when what -judge asks for is
// judged. The reasons are printed with the verdict: the error says only
// which figures they concern, in one line.
func (cfg *Config) judgeExit(s *schema.Summary) error {
	if judgedVerdict(s.Verdict) {
		return nil
	}
	j := s.Judged
	if j == nil {
		return fmt.Errorf("%w: %s", ErrNotJudged, strings.Join(s.Reasons, "; "))
	}
	if j.Counts && cfg.Judge == "counts" {
		return nil
	}
	if j.Counts {
		return fmt.Errorf("%w: the timings (%d reason%s above); the counts are judged: -judge counts exits 0 on them", ErrNotJudged, len(j.TimingReasons), plural(len(j.TimingReasons)))
	}
	n := len(s.Reasons) - len(j.TimingReasons)
	return fmt.Errorf("%w: the counts (%d reason%s above), so nothing can be gated on", ErrNotJudged, n, plural(n))
}

// idleOverlays is tgt as a run that leaves copyspy (noCopies) or
// allocspy (noAllocs) idle sees it: built in, not counted.
func idleOverlays(tgt *withagent.Binary, noCopies, noAllocs bool) *withagent.Binary {
	if !noCopies && !noAllocs {
		return tgt
	}
	t := *tgt
	if noCopies {
		t.Copies, t.CopiesOff = false, ""
	}
	if noAllocs {
		t.Allocs, t.AllocsOff = false, ""
	}
	return &t
}

// pinLoad pins this process, the load driver, to the plan's load CPUs
// (when it has them) and returns what undoes it.
func pinLoad(plan proc.CPUPlan) (func(), error) {
	if len(plan.Load) == 0 {
		return func() {}, nil
	}
	unpin, err := proc.PinSelf(plan.Load)
	if err != nil {
		return nil, fmt.Errorf("pinning the load driver: %w", err)
	}
	return unpin, nil
}

// floor measures the floor of the target the session measured (-floor),
// by what it answered, never its name: targets/floor under a TCP server,
// targets/udpfloor under a QUIC one (with the QUIC window's transfers);
// a plain-UDP target is a floor itself. It runs once the target stopped,
// on the CPUs the session holds.
func (s *session) floor(ctx context.Context, quic *load.Result) (*schema.Summary, error) {
	cfg := s.cfg
	switch {
	case !cfg.Floor:
		return nil, nil
	case !s.addr.UDP:
		s.logf("measuring the floor (targets/floor) with the same settings")
		return runFloor(ctx, cfg, "floor", Config{Spec: load.Spec{Path: "/"}, CountConfig: CountConfig{Syscalls: "proc-io"}})
	case cfg.Spec.ProtoFor(load.Endpoint(s.addr)) != "quic":
		s.logf("-floor: no floor under a plain-UDP target; it is one")
		return nil, nil
	}
	return runUDPFloor(ctx, cfg, quic, s.logf)
}

// runUDPFloor measures targets/udpfloor with the QUIC run's transfer size
// and mode, in datagrams of the largest size the QUIC connection sent: the
// kernel's floor under the same transfers.
func runUDPFloor(ctx context.Context, cfg Config, quic *load.Result, logf func(string, ...any)) (*schema.Summary, error) {
	pkt := int(quic.MaxDatagram)
	if pkt <= bulk.HeaderSize {
		return nil, fmt.Errorf("floor: the QUIC window counted no datagrams")
	}
	logf("measuring the UDP floor (targets/udpfloor): transfers of %d bytes in datagrams of %d", cfg.Size, pkt)
	return runFloor(ctx, cfg, "udpfloor", Config{CountConfig: CountConfig{Syscalls: cfg.Syscalls}, Spec: load.Spec{Proto: "udp", Size: cfg.Size, Pkt: pkt}, TargetConfig: TargetConfig{Args: modeArgs(cfg.Args)}})
}

// runFloor measures perfspy's targets/<name> with cfg's load settings and
// what fc adds: its timing window only, its results in a folder removed
// afterwards.
func runFloor(ctx context.Context, cfg Config, name string, fc Config) (*schema.Summary, error) {
	root, err := srcroot.Dir()
	if err != nil {
		return nil, err
	}
	fdir, err := os.MkdirTemp("", "perfspy-floor-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(fdir)
	fc.Target, fc.Out = filepath.Join(root, "targets", name), filepath.Join(fdir, "out")
	fc.Conns, fc.Warmup, fc.Duration, fc.CPUs = cfg.Conns, cfg.Warmup, cfg.Duration, cfg.CPUs
	fc.Copies, fc.Allocs, fc.ReadyTimeout, fc.MinRequests = "off", "heapprofile", cfg.ReadyTimeout, cfg.MinRequests
	fr, err := run(ctx, fc, internals{timingOnly: true}, nil)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		return nil, fmt.Errorf("floor (targets/%s): %w", name, err)
	}
	return fr.Summary, nil
}

// modeArgs returns the -mode flag among a bulk target's arguments.
func modeArgs(args []string) []string {
	for i, a := range args {
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "mode" || !strings.HasPrefix(a, "-") {
			continue
		}
		if hasValue {
			return []string{a}
		}
		if i+1 < len(args) {
			return []string{a, args[i+1]}
		}
	}
	return nil
}

// targetEnv is the target's environment: probe's, the agent's socket, and
// -env last, so that it wins.
func targetEnv(cfg Config, extra ...string) []string {
	env := append(os.Environ(), extra...)
	if cfg.MaxRoutes > 0 {
		env = append(env, routes.MaxRoutesEnv+"="+strconv.Itoa(cfg.MaxRoutes))
	}
	if cfg.Sample > 0 {
		env = append(env, routes.SampleEnv+"="+strconv.Itoa(cfg.Sample))
	}
	// grpc-go labels each call's goroutine with its method: the mark of
	// the calls its own server serves (routes.PprofOverlay).
	if os.Getenv(routes.GRPCLabelsEnv) == "" {
		env = append(env, routes.GRPCLabelsEnv+"="+routes.GRPCLabelsOn)
	}
	return append(env, cfg.Env...)
}

// prepareRun names the commit of a built target, creates the results
// folder, and a private (0700) folder for the agent's socket and files.
func prepareRun(cfg Config, tgt *withagent.Binary) (commit, out, priv string, err error) {
	commit = tgt.Commit
	if commit == "" {
		commit = "nocommit"
	} else if tgt.Dirty {
		commit += "-dirty"
	}
	if out, err = makeOutDir(cfg.Out, commit, tgt.Name); err != nil {
		return "", "", "", err
	}
	if priv, err = os.MkdirTemp("", "perfspy-"); err != nil {
		return "", "", "", err
	}
	if err = os.Chmod(priv, 0o700); err != nil {
		os.RemoveAll(priv)
		return "", "", "", err
	}
	return commit, out, priv, nil
}

// makeOutDir creates the results folder. It never reuses an existing one:
// an explicit -out that exists is an error, and a default name that exists
// gets a numeric suffix.
func makeOutDir(out, commit, name string) (string, error) {
	if out != "" {
		if err := os.Mkdir(out, 0o700); err != nil {
			if errors.Is(err, os.ErrExist) {
				return "", fmt.Errorf("-out %s: already exists; probe never overwrites a results folder", out)
			}
			return "", fmt.Errorf("-out: %w", err)
		}
		return out, nil
	}
	if err := os.MkdirAll("results", 0o755); err != nil {
		return "", err
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	base := filepath.Join("results", fmt.Sprintf("%s_%s_%s", stamp, commit, name))
	for i := 1; ; i++ {
		dir := base
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", base, i)
		}
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
}

// profileFromFile reads a profile the agent wrote.
func profileFromFile(path string) (*profile.Profile, error) {
	p, err := readProfile(path)
	if err != nil {
		return nil, fmt.Errorf("agent profile: %w", err)
	}
	return p, nil
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
