package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/elfsym"
	"github.com/perfspy/perfspy/internal/limits"
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

// MaxConns is the most connections -conns takes.
const MaxConns = 4096

// DefaultTarget is what probe run measures when no target is named.
const DefaultTarget = withagent.DefaultTarget

// Config is one probe run. Zero fields get the defaults of the flags.
type Config struct {
	// Spec is the load driver's settings.
	load.Spec
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
	Exec     []string
	Addr     string // override the discovered address
	Warmup   time.Duration
	Duration time.Duration
	// ExactDuration bounds the load of the windows after the timing
	// window (attribution, copies, off-CPU, wall clock): counts need
	// requests, not time. 0 is Duration.
	ExactDuration time.Duration
	CPUs          string // auto, none or SERVER:LOAD
	Out           string // results folder; default results/<UTC>_<commit>_<target>
	ReadyTimeout  time.Duration
	MinRequests   int64  // fewer successes than this in a window: not judged
	Copies        string // copy counting: overlay (default) or off
	Allocs        string // allocation source: allocspy (default) or heapprofile
	Syscalls      string // syscall source: bpf (default; falls back to proc-io when not root) or proc-io
	// RequestFile is -requests FILE, whose requests are Spec.Mix; each is
	// also measured in windows of its own (Summary.Endpoints).
	RequestFile string
	// Alone measures each request of a request file alone too, in
	// windows of its own, after the mix (-alone).
	Alone bool
	// MaxRoutes caps the distinct routes the target names (-max-routes;
	// the rest are "other"); 0 is the target's default (100).
	MaxRoutes int
	// Live, with Instructions, builds the target as probe build does
	// (allocspy, copyspy, the request marks and live mode), so that the
	// window counts what those cost per request; Env configures them.
	Live bool
	// Sample is N when one request in N of each route is accounted
	// (-sample: PERFSPY_SAMPLE, live mode's sampling); 0 accounts all.
	Sample int
	// Push sends the run's profiles to a profile store (-push).
	Push PushConfig
	// Env is added to the target's environment, KEY=VALUE each.
	Env []string
	// OffCPU adds the off-CPU window: an execution trace, block and mutex
	// profiles, and (with Wallclock) the agent's wall-clock profile.
	OffCPU    bool
	Wallclock bool
	// Retained adds the retained window: what the requests leave behind
	// (heap still live after two GCs, goroutines still running).
	Retained bool
	// NoBills leaves the requests' own bills out of the attribution
	// window (-bills=false).
	NoBills bool
	// fgprofRef makes fgprof the wall-clock profiler, the reference of
	// the benchmark that sets it against the trace (perfspy's targets only).
	fgprofRef bool
	// noTrace leaves the execution trace out of the off-CPU window, for
	// the benchmark that sets fgprof alone against the trace.
	noTrace bool
	// Instructions measures instructions per request under callgrind
	// instead of the usual windows; Requests bounds its load (default 2000).
	Instructions bool
	Requests     int
	// Floor also measures targets/floor, the minimal server, with the same
	// settings, and reports the target's CPU per request against it.
	Floor bool
	// timingOnly measures the timing window alone (the floor run).
	timingOnly bool
	Flags      []string // every flag as given, for meta (secrets redacted)
	seams      seams    // the tests' stand-ins
	// ResultsMode is the results folder's permission mode (its files get
	// it without execute); 0 is 0700.
	ResultsMode os.FileMode
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
		{"allocs", &cfg.Allocs, []string{"allocspy", "heapprofile"}},
		{"syscalls", &cfg.Syscalls, []string{"bpf", "proc-io", "off"}},
		{"proto", &cfg.Proto, []string{"auto", "http", "https", "h2c", "h2", "grpc", "framed", "quic", "udp"}},
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
	if a := cfg.Arrivals; a.Rate < 0 || math.IsNaN(a.Rate) || math.IsInf(a.Rate, 0) || a.Rate > 10_000_000 {
		return proc.CPUPlan{}, fmt.Errorf("-rate %g: want requests per second, above 0 and at most 1e7 (0: closed loop)", a.Rate)
	}
	// A gap longer than the window sends nothing in it, and one past
	// 2^63 ns cannot be scheduled: both refused here, before any build.
	if a := cfg.Arrivals; a.Open() && float64(time.Second)/a.Rate > float64(max(cfg.Duration, time.Second)) {
		return proc.CPUPlan{}, fmt.Errorf("-rate %g: one request every %.3gs, longer than the window (-duration %v): it would send none", a.Rate, 1/a.Rate, cfg.Duration)
	}
	if err := cfg.validatePaths(); err != nil {
		return proc.CPUPlan{}, err
	}
	if p := cfg.Proto; cfg.Arrivals.Open() && closedLoopOnly(p) {
		return proc.CPUPlan{}, fmt.Errorf("-rate: the %s driver sends in a closed loop only; open-loop load is for http, https, h2c, h2 and grpc", p)
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

// closedLoopOnly says whether the driver of proto (a -proto value) sends
// in a closed loop only, and payloads of its own making.
func closedLoopOnly(proto string) bool {
	return proto == "framed" || proto == "quic" || proto == "udp"
}

// validatePaths checks, before any build, the paths the run will use
// after it: -out's folder, -cacert's certificate, the .proto files and
// their import paths, and -exec's program.
func (cfg Config) validatePaths() error {
	if cfg.Out != "" {
		parent := filepath.Dir(filepath.Clean(cfg.Out))
		if st, err := os.Stat(parent); err != nil || !st.IsDir() {
			return fmt.Errorf("-out %s: its folder %s does not exist (probe makes the results folder, not the folders above it)", cfg.Out, parent)
		}
	}
	if cfg.CACert != "" {
		if _, err := tlsConfig(cfg); err != nil {
			return err
		}
	}
	for _, f := range cfg.ProtoFiles {
		if st, err := os.Stat(f); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("-proto-file %s: not a regular file", f)
		}
	}
	for _, d := range cfg.ImportPaths {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return fmt.Errorf("-import-path %s: not a folder", d)
		}
	}
	if len(cfg.Exec) > 0 {
		if _, err := exec.LookPath(cfg.Exec[0]); err != nil {
			return fmt.Errorf("-exec %s: %w", cfg.Exec[0], err)
		}
	}
	if len(cfg.Data) > 0 && closedLoopOnly(cfg.Proto) {
		return fmt.Errorf("-data: the %s driver sends no body of yours; -data is the body of http, https, h2c and h2 requests and grpc's message", cfg.Proto)
	}
	return nil
}

// validateLoad checks the window's and the load driver's flags.
func (cfg Config) validateLoad() error {
	switch {
	case cfg.Duration <= 0 && !cfg.Instructions:
		return fmt.Errorf("-duration %v: must be positive", cfg.Duration)
	case cfg.Warmup < 0:
		return fmt.Errorf("-warmup %v: must not be negative", cfg.Warmup)
	case cfg.ExactDuration < 0:
		return fmt.Errorf("-exact-duration %v: must not be negative", cfg.ExactDuration)
	case cfg.Conns < 0 || cfg.Conns > MaxConns:
		return fmt.Errorf("-conns %d: want 1 to %d (each connection is dialed before a window opens; more stretch the window without loading the server harder)", cfg.Conns, MaxConns)
	case cfg.ReadyTimeout < 0:
		return fmt.Errorf("-ready-timeout %v: must be positive", cfg.ReadyTimeout)
	case cfg.MinRequests < 0:
		return fmt.Errorf("-min-requests %d: must not be negative", cfg.MinRequests)
	case !strings.HasPrefix(cfg.Path, "/"):
		return fmt.Errorf("-path %q: must start with /", cfg.Path)
	case cfg.Size < 0 || cfg.Size > 1<<30:
		return fmt.Errorf("-size %d: want 1 byte to 1 GiB", cfg.Size)
	case cfg.Streams < 0:
		return fmt.Errorf("-streams %d: must be positive", cfg.Streams)
	case cfg.Pkt != 0 && (cfg.Pkt <= bulk.HeaderSize || cfg.Pkt > 65507):
		return fmt.Errorf("-pkt %d: want %d to 65507", cfg.Pkt, bulk.HeaderSize+1)
	}
	if err := load.CheckPath(cfg.Path); err != nil {
		return fmt.Errorf("-path: %w", err)
	}
	return nil
}

// ErrNotJudged is returned, with the files written, when the window cannot
// support a verdict. Commands exit 3 on it.
var ErrNotJudged = errors.New("not judged")

// Result is what Run produced.
type Result struct {
	Dir       string
	Summary   *schema.Summary
	Sites     []report.Site  // allocation sites of the attribution window
	CopySites []copyspy.Site // copy sites of the attribution window
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
	var floor *schema.Summary
	if cfg.Floor && !looksBulk(cfg) {
		logf("measuring the floor (targets/floor) with the same settings")
		if floor, err = runFloor(ctx, cfg, "floor", Config{Spec: load.Spec{Path: "/"}, Syscalls: "proc-io"}); err != nil {
			return nil, err
		}
	}
	// Every runtime overlay is built in whatever the flags count: one
	// build (and one standard library built with the overlays) serves
	// every mode, and an overlay the run does not use stays idle, as all
	// of them are in the timing window.
	tgt, err := withagent.Build(ctx, cfg.Target, withagent.BuildOptions{Toolchain: cfg.Toolchain, Copies: true, Allocs: true, Wallclock: cfg.OffCPU && cfg.Wallclock && !cfg.fgprofRef, FgprofRef: cfg.OffCPU && cfg.fgprofRef, Requests: true,
		Overlays: spyOverlays(cfg.seams)}, logf)
	if err != nil {
		return nil, err
	}
	tgt = idleOverlays(tgt, cfg.Copies == "off", cfg.Allocs != "allocspy")
	if err := (BenchConfig{Exec: cfg.Exec}).checkArch(tgt); err != nil {
		return nil, err
	}
	s, err := startSession(ctx, cfg, plan, tgt, logf)
	if err != nil {
		return nil, err
	}
	defer s.close()
	win, raw, err := s.windows(ctx)
	if err != nil {
		return nil, err
	}
	s.p.Stop()
	if cfg.Floor && s.addr.UDP {
		if driverProto(s.cfg, s.addr) != "quic" {
			logf("-floor: no floor under a plain-UDP target; it is one")
		} else if floor, err = runUDPFloor(ctx, cfg, win.clean.load, logf); err != nil {
			return nil, err
		}
	}
	logf("writing %s", s.out)
	res, err := writeResults(&runOutput{ses: s, win: win, raw: raw, reasons: s.reasons, floor: floor})
	if errors.Is(err, ErrIncomplete) {
		return res, err // the verdict, with what was not written
	}
	if err != nil {
		return nil, err
	}
	if !judgedVerdict(res.Summary.Verdict) {
		return res, fmt.Errorf("%w: %s", ErrNotJudged, strings.Join(res.Summary.Reasons, "; "))
	}
	return res, nil
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

// driverName names the driver newDriver makes.
func driverName(cfg Config, ep proc.Endpoint) string {
	switch p := driverProto(cfg, ep); {
	case p == "grpc" && cfg.GRPCDriver == "grpcgo":
		return "grpcgo"
	case p == "h2c" && !h2cLean(cfg):
		return "h2c-nethttp"
	case p != "http":
		return p
	}
	return cfg.HTTPDriver
}

// newDriver makes the load driver of cfg.Proto, -proto auto resolved
// (resolveProto).
func newDriver(cfg Config, ep proc.Endpoint) (load.Driver, error) {
	proto := driverProto(cfg, ep)
	if cfg.Arrivals.Open() && closedLoopOnly(proto) {
		return nil, fmt.Errorf("-rate: the %s driver sends in a closed loop only; open-loop load is for http, https, h2c, h2 and grpc", proto)
	}
	if len(cfg.Data) > 0 && closedLoopOnly(proto) {
		return nil, fmt.Errorf("-data: the %s driver sends no body of yours; -data is the body of http, https, h2c and h2 requests and grpc's message", proto)
	}
	switch proto {
	case "framed":
		return load.NewFramed(load.FramedOptions{Addr: ep.Addr, Conns: cfg.Conns, BodySize: cfg.BodySize})
	case "quic":
		return load.NewQUIC(load.QUICOptions{Addr: ep.Addr, Conns: cfg.Conns, Streams: cfg.Streams, Size: cfg.Size})
	case "udp":
		return load.NewUDP(load.UDPOptions{Addr: ep.Addr, Conns: cfg.Conns, Size: cfg.Size, Pkt: cfg.Pkt})
	case "grpc":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		method := cfg.Method
		if !strings.Contains(method, "/") && len(cfg.ProtoFiles) == 0 {
			// No RPC named: a server of one method is sent that one.
			if m, ok := load.OnlyMethod(ctx, ep.Addr); ok {
				method = m
			}
		}
		opt := load.GRPCOptions{Addr: ep.Addr, Method: method, Data: cfg.Data, Headers: cfg.Headers, Conns: cfg.Conns, Arrivals: cfg.Arrivals}
		if len(cfg.ProtoFiles) > 0 {
			var err error
			if opt.Files, err = load.ProtoFiles(ctx, cfg.ProtoFiles, cfg.ImportPaths); err != nil {
				return nil, err
			}
		}
		if cfg.GRPCDriver == "grpcgo" {
			return load.NewGRPC(ctx, opt)
		}
		d, err := load.NewGRPCLean(ctx, opt)
		if err != nil {
			return nil, fmt.Errorf("%w (-grpc-driver grpcgo sends any request)", err)
		}
		return d, nil
	case "http", "https", "h2c", "h2":
		return newHTTPDriver(cfg, ep, proto)
	default:
		return nil, fmt.Errorf("-proto %q: want auto, http, https, h2c, h2, grpc, framed, quic or udp", cfg.Proto)
	}
}

// newHTTPDriver makes the HTTP drivers: HTTP/1.1 (lean or net/http's)
// over TCP or TLS, HTTP/2 with prior knowledge (h2c) or over TLS (h2).
func newHTTPDriver(cfg Config, ep proc.Endpoint, proto string) (load.Driver, error) {
	scheme := "http"
	if proto == "https" || proto == "h2" {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: ep.Addr, Path: cfg.Path}
	if q := strings.IndexByte(cfg.Path, '?'); q >= 0 {
		u.Path, u.RawQuery = cfg.Path[:q], cfg.Path[q+1:]
	}
	opt := load.HTTPOptions{URL: u.String(), Method: cfg.Method, Body: httpBody(cfg), Conns: cfg.Conns, Headers: cfg.Headers, Mix: cfg.Mix, Arrivals: cfg.Arrivals}
	if len(cfg.Mix) > 0 && (proto == "h2c" || proto == "h2" || cfg.HTTPDriver != "lean") {
		return nil, fmt.Errorf("-requests %s: request files are sent by the lean HTTP/1.1 driver (http or https, -http-driver lean)", cfg.RequestFile)
	}
	if scheme == "https" {
		var err error
		if opt.TLS, err = tlsConfig(cfg); err != nil {
			return nil, err
		}
	}
	switch {
	case proto == "h2c" && h2cLean(cfg):
		return load.NewH2Lean(opt)
	case proto == "h2c" || proto == "h2":
		return load.NewH2(opt, cfg.Conns, cfg.Streams)
	case cfg.HTTPDriver == "lean":
		return load.NewLean(opt)
	}
	return load.NewHTTP(opt)
}

// h2cLean says whether h2c load goes through the lean driver: with
// -http-driver lean (the default), one stream per connection and a body
// of one DATA frame; otherwise net/http's client sends it.
func h2cLean(cfg Config) bool {
	return cfg.HTTPDriver == "lean" && cfg.Streams <= 1 && len(httpBody(cfg)) <= load.MaxLeanH2Body
}

// httpBody is the HTTP requests' body: -body's file, else -data's text
// (which is grpc's message when the server speaks gRPC).
func httpBody(cfg Config) []byte {
	if cfg.Body != nil {
		return cfg.Body
	}
	return cfg.Data
}

// tlsConfig is the drivers' TLS: the server's certificate verified
// against -cacert (else the system's roots), or not at all (-insecure).
func tlsConfig(cfg Config) (*tls.Config, error) {
	c := &tls.Config{InsecureSkipVerify: cfg.Insecure}
	if cfg.CACert != "" {
		b, err := limits.ReadFile(cfg.CACert, limits.Body, "-max-body")
		if err != nil {
			return nil, fmt.Errorf("-cacert: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("-cacert %s: no PEM certificate in it", cfg.CACert)
		}
	}
	return c, nil
}

// tlsNote says how a TLS driver checked the server's certificate; "" for
// the drivers without TLS.
func tlsNote(cfg Config) string {
	if cfg.Proto != "https" && cfg.Proto != "h2" {
		return ""
	}
	switch {
	case cfg.Insecure:
		return "certificate NOT verified (-insecure)"
	case cfg.CACert != "":
		return "certificate verified against " + cfg.CACert + " (-cacert)"
	}
	return "certificate verified against the system's roots"
}

// driverProto is the protocol of the driver: -proto, or what -proto
// auto can tell without asking the target (resolveProto asks it): a UDP
// socket is QUIC, a -method naming an RPC is gRPC, else HTTP.
func driverProto(cfg Config, ep proc.Endpoint) string {
	if cfg.Proto != "" && cfg.Proto != "auto" {
		return cfg.Proto
	}
	switch {
	case ep.UDP:
		return "quic"
	case strings.Contains(cfg.Method, "/"):
		return "grpc"
	}
	return "http"
}

// resolveProto resolves -proto auto for a started target by what it
// answers, never by its name: on UDP, the bulk protocol (udp) or else
// QUIC; on TCP, HTTP/1.1, else gRPC reflection, else the framed
// protocol, else HTTP (whose warm-up then says what failed).
func resolveProto(ctx context.Context, cfg Config, ep proc.Endpoint) string {
	p := driverProto(cfg, ep)
	if cfg.Proto != "" && cfg.Proto != "auto" {
		return p
	}
	switch {
	case ep.UDP:
		if load.AnswersBulkUDP(ctx, ep.Addr) {
			return "udp"
		}
	// An HTTP/1 server is never sent a gRPC preface (it would log a
	// "PRI *" request it cannot serve) or a frame: only a target that
	// does not answer HTTP/1.1 is asked for the others.
	case p == "http" && !load.AnswersHTTP1(ctx, ep.Addr, cfg.Path):
		if load.AnswersReflection(ctx, ep.Addr) {
			return "grpc"
		}
		if load.AnswersFramed(ctx, ep.Addr) {
			return "framed"
		}
	}
	return p
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

// looksBulk tells, before the build, a target whose floor is
// targets/udpfloor: one of the bulk targets, or a bulk -proto.
func looksBulk(cfg Config) bool {
	switch filepath.Base(cfg.Target) {
	case "quicecho", "udpfloor":
		return true
	}
	return cfg.Proto == "quic" || cfg.Proto == "udp"
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
	return runFloor(ctx, cfg, "udpfloor", Config{Syscalls: cfg.Syscalls, Spec: load.Spec{Proto: "udp", Size: cfg.Size, Pkt: pkt}, Args: modeArgs(cfg.Args)})
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
	fc.Target, fc.Out, fc.timingOnly = filepath.Join(root, "targets", name), filepath.Join(fdir, "out"), true
	fc.Conns, fc.Warmup, fc.Duration, fc.CPUs = cfg.Conns, cfg.Warmup, cfg.Duration, cfg.CPUs
	fc.Copies, fc.Allocs, fc.ReadyTimeout, fc.MinRequests = "off", "heapprofile", cfg.ReadyTimeout, cfg.MinRequests
	fr, err := Run(ctx, fc, nil)
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
