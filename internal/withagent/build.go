package withagent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy"
	"github.com/perfspy/perfspy/internal/agentmod"
	"github.com/perfspy/perfspy/internal/cache"
	"github.com/perfspy/perfspy/internal/owned"
	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/internal/worktree"
	"github.com/perfspy/perfspy/schema"
)

// DefaultTarget is what probe run measures when no target is named.
const DefaultTarget = "./targets/httpjson"

const agentImport = agentmod.Path

// agentFileName is the file the overlay adds to the target's package main.
const agentFileName = "zz_perfspy_agent.go"

// Binary describes what was built.
type Binary struct {
	Spec        string // as the user gave it
	Name        string // short name for folders and benchmark names
	PkgDir      string // directory of the main package
	ModDir      string // root of the module that builds it
	Binary      string // built executable, in the cache folder
	PlainBinary string // with BuildOptions.Test: the test binary without overlays
	GoVersion   string
	GOARCH      string // the architecture built for (go env GOARCH: the environment's GOARCH)
	Commit      string // git commit of PkgDir's repository, "" if none
	Dirty       bool
	Copies      bool   // built with the copyspy overlay
	CopiesOff   string // why not, when asked for
	Allocs      bool   // built with the allocspy overlay
	AllocsOff   string // why not, when asked for
	Requests    bool   // built with the request-boundary overlay of net/http
	RequestsOff string // why not, when asked for
	Live        bool   // built with the agent's live mode (probe build)
	// BuildMode is how the agent got in: module, vendor, workspace or
	// self (perfspy's own module).
	BuildMode string
	// BuildCheck compares the binary's build list with a plain build's.
	BuildCheck *schema.BuildCheck
}

// BuildError is a target that did not build; Output is the go command's output.
type BuildError struct {
	Spec   string
	Output string
	Err    error
}

func (e *BuildError) Error() string {
	// Quoted: the go command prints file names a //line directive sets,
	// which must not begin a line a CI runner parses as a command.
	return fmt.Sprintf("building %s: %v\n%s", e.Spec, e.Err, safetext.Relayed(strings.TrimSpace(e.Output)))
}

func (e *BuildError) Unwrap() error { return e.Err }

// cacheDir is where binaries and temporary module files go, never the
// target's directory: private to the user, checked on every use.
func cacheDir() (string, error) { return cache.Dir() }

func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	var out bytes.Buffer
	err := RunGo(ctx, dir, env, &out, &out, args...)
	return out.String(), err
}

// findModRoot walks up from dir to the directory holding go.mod.
func findModRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside a Go module (no go.mod above it)", dir)
		}
	}
}

func modulePathOf(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// buildPrefix begins the name of each build's private folder in the cache.
const buildPrefix = "build-"

// BuildOptions chooses what is compiled into the target.
type BuildOptions struct {
	// Toolchain is GOTOOLCHAIN for the build (a version, "local", ...):
	// "" leaves the environment's, so that the toolchain is the one go
	// build would use.
	Toolchain  string
	Copies     bool     // add copyspy's runtime overlay
	Allocs     bool     // add allocspy's runtime overlay
	Wallclock  bool     // add the agent's wall-clock sampler
	FgprofRef  bool     // add fgprof instead, the benchmark's reference (perfspy's targets only)
	Requests   bool     // mark each net/http request: its route (the request mark) and a trace region (the off-CPU window)
	Live       bool     // add the agent's live mode (agent/live; probe build), with Allocs
	Tags       []string // build tags, e.g. valgrind
	Repeatable bool     // take out the runtime's random choices (instructions runs)
	// Test builds the package's test binary (go test -c) with the
	// benchmark window (benchwin) instead of the agent, and a plain test
	// binary beside it (Binary.PlainBinary).
	Test bool
	// Overlays write the spies' files; the measuring packages own them.
	Overlays Overlays
}

// Build builds spec with the agent added to its package main. spec is a
// directory (of this module or another) or module/path/cmd/x@version.
// The binary's build list is checked against a plain build's: a binary
// that differs in anything but the agent module is refused.
func Build(ctx context.Context, spec string, opts BuildOptions, logf func(string, ...any)) (*Binary, error) {
	root, err := cacheDir()
	if err != nil {
		return nil, err
	}
	// A build's folder names its process, so that one a killed run left
	// (SIGKILL during a review) is removed by the next build.
	if err := owned.RemoveStale(root, buildPrefix); err != nil {
		logf("perfspy: a killed run's build folder was not removed: %v", err)
	}
	work, err := os.MkdirTemp(root, buildPrefix)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if err := owned.Claim(work); err != nil {
		return nil, err
	}
	b := &builder{t: &Binary{Spec: spec}, opts: opts, work: work, cache: root, logf: logf}
	defer heartbeat(spec, logf)()
	steps := []func(context.Context) error{b.locate, b.prepare, b.overlays, b.compile, b.check}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
	return b.t, nil
}

// builder holds a build's state from one step to the next.
type builder struct {
	t       *Binary
	opts    BuildOptions
	work    string // private folder of this build
	cache   string
	logf    func(string, ...any)
	env     []string
	modFlag string
	setup   *Setup
	replace map[string]string // overlay entries every build has (the agent's files)
	spies   map[string]string // the runtime spies' entries, left out of a plain build
	// plain are the plain test binary's overlay entries: with Repeatable,
	// the runtime's random choices taken out (instructions per op).
	plain map[string]string
}

// locate finds the target's package folder: a directory, or a module
// version fetched through the proxy.
func (b *builder) locate(ctx context.Context) error {
	t, spec := b.t, b.t.Spec
	// The go command's temporary folders go into the build's own, which
	// is removed however the build ends.
	gotmp := filepath.Join(b.work, "gotmp")
	if err := os.Mkdir(gotmp, 0o700); err != nil {
		return err
	}
	b.env = append(os.Environ(), "GOTMPDIR="+gotmp)
	if b.opts.Toolchain != "" {
		b.env = append(b.env, "GOTOOLCHAIN="+b.opts.Toolchain)
	}
	if strings.Contains(spec, "@") {
		dir, err := fetchVersioned(ctx, spec, b.work, b.cache, b.opts.Test, b.logf)
		if err != nil {
			return err
		}
		t.PkgDir = dir
		t.Name = ProgramName(strings.SplitN(spec, "@", 2)[0])
		// As go install module@version builds: no workspace, and the
		// module's go.sum completed from the checksum database.
		b.env, b.modFlag = append(b.env, "GOWORK=off"), "mod"
		return nil
	}
	path := spec
	if spec == DefaultTarget {
		var err error
		if path, err = defaultTargetDir(b.cache); err != nil {
			return err
		}
	}
	dir, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if st, err := os.Stat(dir); (err != nil || !st.IsDir()) && b.opts.Test {
		// A package of the standard library, by its import path.
		dir, err = stdPackageDir(ctx, spec, b.env)
		if err != nil {
			return err
		}
	} else if err != nil || !st.IsDir() {
		return fmt.Errorf("target %s: not a directory", spec)
	}
	t.PkgDir, t.Name = dir, filepath.Base(dir)
	return nil
}

// prepare sets the build up with the agent added (withagent), having
// listed the plain build's modules.
func (b *builder) prepare(ctx context.Context) error {
	t := b.t
	mod, err := findModRoot(t.PkgDir)
	if err != nil {
		return fmt.Errorf("target %s: %w", t.Spec, err)
	}
	t.ModDir = mod
	modPath, err := modulePathOf(filepath.Join(mod, "go.mod"))
	if err != nil {
		return err
	}
	if note := toolchainNote(ctx, mod, b.env); note != "" {
		b.logf("%s", note)
	}
	b.setup, err = Prepare(ctx, Target{ModRoot: mod, ModPath: modPath, PkgDir: t.PkgDir, Tags: b.opts.Tags, Env: b.env, ModFlag: b.modFlag, Test: b.opts.Test}, b.work, b.cache)
	if err != nil {
		var nm *NotMainError
		if errors.As(err, &nm) {
			nm.Path = t.Spec
			return nm
		}
		return fmt.Errorf("target %s: %w", t.Spec, err)
	}
	t.BuildMode, t.GoVersion, t.GOARCH = b.setup.Mode, b.setup.Toolchain.GOVERSION, b.setup.Toolchain.GOARCH
	sum := sha256.Sum256([]byte(t.PkgDir + "\x00" + t.Spec + "\x00" + strconv.FormatBool(b.opts.Live) + "\x00" + t.GoVersion + "\x00" + strconv.FormatBool(b.opts.Repeatable)))
	binRoot := filepath.Join(b.cache, "bin")
	if set := worktree.SetOf(t.PkgDir); set != "" {
		// A revision's temporary checkout (probe ab, bisect, review):
		// its folder is new each run, so a key of it in the cache would
		// pile up a binary per run (1 GB a day); the binary goes with
		// the set, removed with it.
		binRoot = filepath.Join(set, ".bin")
	}
	binDir := filepath.Join(binRoot, hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	t.Binary = filepath.Join(binDir, t.Name)
	if b.opts.Test {
		t.Binary += ".test"
		t.PlainBinary = t.Binary + ".plain"
	}
	return nil
}

// stdPackageDir finds the folder of a standard-library package, in the
// GOROOT of the toolchain env selects.
func stdPackageDir(ctx context.Context, spec string, env []string) (string, error) {
	out, err := goCmd(ctx, "", env, "list", "-f", "{{.Dir}}\t{{.Standard}}", spec)
	dir, std, _ := strings.Cut(strings.TrimSpace(out), "\t")
	if err != nil || std != "true" {
		return "", fmt.Errorf("target %s: not a directory, module/path@version or standard-library package", spec)
	}
	return dir, nil
}

// overlays writes the overlay's files: the agent and what the options ask
// for. A runtime spy this release does not take is left out, and the
// target says why.
func (b *builder) overlays(ctx context.Context) error {
	t, opts, work, pkgDir := b.t, b.opts, b.work, b.setup.PkgDir // overlay keys: the folder as the build sees it
	tc := b.setup.Toolchain
	goroot, goarch, goexp := tc.GOROOT, tc.GOARCH, tc.GOEXPERIMENT
	b.replace, b.spies = map[string]string{}, map[string]string{}
	if opts.Test {
		if err := b.testOverlays(); err != nil {
			return err
		}
		if opts.Repeatable {
			// The plain test binary counts instructions per op under
			// callgrind: the same choices every run.
			b.plain = map[string]string{}
			return repeatableOverlay(b.plain, map[string]string{}, goroot, work)
		}
		return nil
	}
	mains := [][2]string{{agentFileName, agentImport}}
	if opts.Wallclock {
		mains = append(mains, [2]string{"zz_perfspy_wallclock.go", agentImport + "/wallclock"})
	}
	if opts.FgprofRef {
		if b.setup.Mode != ModeSelf {
			return fmt.Errorf("target %s: fgprof, the reference wall-clock profiler, is linked only into perfspy's own targets", t.Spec)
		}
		mains = append(mains, [2]string{"zz_perfspy_wallclock.go", SelfModule + "/internal/fgprofref"})
	}
	for _, m := range mains {
		if err := addMainFile(b.replace, work, pkgDir, m[0], m[1]); err != nil {
			return err
		}
	}
	if opts.Copies {
		t.Copies, t.CopiesOff = b.spy("copies", "measuring without copy figures", func() (map[string]string, error) {
			return spyOverlay(work, pkgDir, "copyspy", "copytable", func(dir string) (map[string]string, error) {
				if opts.Overlays.Copies == nil {
					return nil, errNoOverlay("Copies")
				}
				return opts.Overlays.Copies(goroot, goarch, dir)
			})
		})
	}
	if opts.Allocs {
		t.Allocs, t.AllocsOff = b.spy("allocs", "counting allocations with the heap profile at MemProfileRate=1", func() (map[string]string, error) {
			return spyOverlay(work, pkgDir, "allocspy", "alloctable", func(dir string) (map[string]string, error) {
				if opts.Overlays.Allocs == nil {
					return nil, errNoOverlay("Allocs")
				}
				return opts.Overlays.Allocs(goroot, goarch, goexp, dir)
			})
		})
	}
	if opts.Requests {
		t.Requests, t.RequestsOff = b.spy("requests", "off-CPU time without request boundaries", func() (map[string]string, error) {
			dir := filepath.Join(work, "requests")
			if err := os.Mkdir(dir, 0o755); err != nil {
				return nil, err
			}
			if opts.Overlays.Requests == nil {
				return nil, errNoOverlay("Requests")
			}
			return opts.Overlays.Requests(goroot, dir)
		})
	}
	if opts.Live && t.Allocs {
		if err := b.liveOverlay(ctx); err != nil {
			return err
		}
		t.Live = true
	}
	if opts.Repeatable {
		return repeatableOverlay(b.replace, b.spies, goroot, work)
	}
	return nil
}

// testOverlays writes a test binary's overlay: the runtime spies asked
// for and the benchmark window in package testing, which reads them. A
// spy that this release does not take fails the build: the window's
// cross-check needs allocspy.
func (b *builder) testOverlays() error {
	tc, t, ov := b.setup.Toolchain, b.t, b.opts.Overlays
	if ov.Allocs == nil || ov.Bench == nil || b.opts.Copies && ov.Copies == nil {
		return errNoOverlay("Allocs, Bench and (with Copies) Copies")
	}
	add := func(name string, patch func(dir string) (map[string]string, error)) error {
		dir := filepath.Join(b.work, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		files, err := patch(dir)
		if err != nil {
			return fmt.Errorf("target %s: %w", t.Spec, err)
		}
		maps.Copy(b.replace, files)
		return nil
	}
	if err := add("allocspy", func(dir string) (map[string]string, error) {
		return ov.Allocs(tc.GOROOT, tc.GOARCH, tc.GOEXPERIMENT, dir)
	}); err != nil {
		return err
	}
	t.Allocs = true
	if b.opts.Copies {
		if err := add("copyspy", func(dir string) (map[string]string, error) {
			return ov.Copies(tc.GOROOT, tc.GOARCH, dir)
		}); err != nil {
			return err
		}
		t.Copies = true
	}
	return add("benchwin", func(dir string) (map[string]string, error) {
		return ov.Bench(tc.GOROOT, dir, b.opts.Copies)
	})
}

// spy adds a runtime spy's overlay entries; when it cannot, it says why
// and what the run does without it.
func (b *builder) spy(what, without string, overlay func() (map[string]string, error)) (bool, string) {
	ov, err := overlay()
	if err != nil {
		b.logf("%s: %v; %s", what, err, without)
		return false, err.Error()
	}
	maps.Copy(b.spies, ov)
	return true, ""
}

// compile builds the binary. When the spies' build fails and a build
// without them works, the Go release does not take the runtime overlays:
// the target is measured without them, and says why.
func (b *builder) compile(ctx context.Context) error {
	t := b.t
	if b.opts.Test {
		return b.compileTest(ctx)
	}
	anySpy := t.Copies || t.Allocs || t.Requests
	full := mergeOverlays(b.replace, b.spies)
	key := b.stdKey(full)
	if anySpy {
		b.logf("building %s with the runtime overlays%s", t.Spec, b.firstBuildNote(key))
	} else {
		b.logf("building %s", t.Spec)
	}
	out, err := b.build(ctx, full)
	if err == nil && anySpy {
		b.markStdBuilt(key)
	}
	if err != nil && anySpy && ctx.Err() == nil {
		if out2, err2 := b.build(ctx, b.replace); err2 == nil {
			why := "the runtime overlay did not build with this Go release: " + firstLines(out, 5)
			for _, sp := range []struct {
				on      *bool
				off     *string
				without string
			}{
				{&t.Copies, &t.CopiesOff, "measuring without copy figures"},
				{&t.Allocs, &t.AllocsOff, "counting allocations with the heap profile"},
				{&t.Requests, &t.RequestsOff, "off-CPU time without request boundaries"},
				{&t.Live, new(string), "no live mode"},
			} {
				if *sp.on {
					*sp.on, *sp.off = false, why
					b.logf("%s; %s", why, sp.without)
				}
			}
			out, err = out2, nil
		}
	}
	if err != nil {
		return &BuildError{Spec: t.Spec, Output: out, Err: err}
	}
	return nil
}

// compileTest builds the instrumented test binary and the plain one,
// which times the benchmarks and whose build list the other must equal.
func (b *builder) compileTest(ctx context.Context) error {
	t := b.t
	var key string
	if strings.Contains(t.Spec, "@") && !b.opts.Repeatable {
		var err error
		if key, err = b.keptKey(ctx); err != nil {
			return err
		}
		if kept(t, key) {
			b.logf("the tests of %s: the binaries built before (the module version, toolchain, environment and overlays are the same)", t.Spec)
			return nil
		}
	}
	stdKey := b.stdKey(b.replace)
	b.logf("building the tests of %s with the benchmark window%s", t.Spec, b.firstBuildNote(stdKey))
	// The two builds share the package's compiled code through the build
	// cache and differ in the standard library and the link: side by side
	// their links overlap.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := clearNonObject(t.PlainBinary); err != nil {
		return err
	}
	plain := make(chan error, 1)
	plainArgs := []string{"test", "-c", "-o", t.PlainBinary}
	if len(b.plain) > 0 {
		ob, _ := json.Marshal(map[string]map[string]string{"Replace": b.plain})
		path := filepath.Join(b.work, "overlay-plain.json")
		if err := os.WriteFile(path, ob, 0o644); err != nil {
			return err
		}
		plainArgs = append(plainArgs, "-overlay="+path)
	}
	go func() {
		args := append(plainArgs, b.setup.Flags...)
		out, err := goCmd(ctx, b.setup.Dir, b.setup.Env, append(args, b.setup.Pkg)...)
		if err != nil {
			err = &BuildError{Spec: t.Spec, Output: out, Err: err}
		}
		plain <- err
	}()
	if out, err := b.build(ctx, b.replace); err != nil {
		cancel()
		<-plain
		return &BuildError{Spec: t.Spec, Output: out, Err: err}
	}
	if err := <-plain; err != nil {
		return err
	}
	b.markStdBuilt(stdKey)
	if key != "" {
		keep(t, key)
	}
	return nil
}

// clearNonObject removes what is at path when it is not an executable
// the go command wrote: go build refuses to write over a file that is
// not an object file, and one left in the cache would break every later
// run of the target.
func clearNonObject(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return nil // nothing there
	}
	if st.Mode().IsRegular() {
		if _, err := buildinfo.ReadFile(path); err == nil {
			return nil
		}
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("%s is not an executable the go command wrote, and cannot be removed: %w", path, err)
	}
	return nil
}

// build runs go build with the overlay entries replace.
func (b *builder) build(ctx context.Context, replace map[string]string) (string, error) {
	for _, p := range []string{b.t.Binary, b.t.PlainBinary} {
		if p == "" || p == b.t.PlainBinary && b.opts.Test {
			continue // compileTest's, built beside this build
		}
		if err := clearNonObject(p); err != nil {
			return "", err
		}
	}
	ob, _ := json.Marshal(map[string]map[string]string{"Replace": replace})
	overlayPath := filepath.Join(b.work, "overlay.json")
	if err := os.WriteFile(overlayPath, ob, 0o644); err != nil {
		return "", err
	}
	args := append([]string{"build", "-overlay=" + overlayPath, "-o", b.t.Binary}, b.setup.Flags...)
	if b.opts.Test {
		args = append([]string{"test", "-c"}, args[1:]...)
	}
	if len(b.opts.Tags) > 0 {
		args = append(args, "-tags="+strings.Join(b.opts.Tags, ","))
	}
	return goCmd(ctx, b.setup.Dir, b.setup.Env, append(args, b.setup.Pkg)...)
}

// check compares the binary's build list with the plain build's, and
// names the target's commit.
func (b *builder) check(ctx context.Context) error {
	t := b.t
	if b.opts.Test {
		// The oracle is the plain test binary itself.
		var err error
		if b.setup.Plain, err = BinaryModules(t.PlainBinary); err != nil {
			return err
		}
	}
	check, err := CheckBinary(t.Binary, b.setup.Mode, b.setup.Plain)
	if err != nil {
		return err
	}
	if b.opts.FgprofRef {
		// The benchmark's reference profiler is the one module a perfspy
		// target may gain; it is never in a measured run.
		check.Added = slices.DeleteFunc(check.Added, func(m schema.Module) bool {
			return m.Path == "github.com/felixge/fgprof" || m.Path == "github.com/google/pprof"
		})
	}
	t.BuildCheck = check
	if err := CheckErr(check); err != nil {
		return fmt.Errorf("target %s: %w", t.Spec, err)
	}
	if _, version, ok := strings.Cut(t.Spec, "@"); ok {
		t.Commit = version
	} else {
		t.Commit, t.Dirty = gitCommit(ctx, t.PkgDir)
	}
	return nil
}

// Overlays write the overlay files of the runtime spies (copyspy,
// allocspy), the request boundaries of net/http (offcpu) and the
// benchmark window of package testing (benchwin): the packages that
// measure own their patches, and hand them to the build here. A spy
// asked for whose function is nil is a programming error, said as one.
type Overlays struct {
	Copies   func(goroot, goarch, dir string) (map[string]string, error)
	Allocs   func(goroot, goarch, goexp, dir string) (map[string]string, error)
	Requests func(goroot, dir string) (map[string]string, error)
	// Bench writes the benchmark window, which reads allocspy's table
	// and, with copies, copyspy's.
	Bench func(goroot, dir string, copies bool) (map[string]string, error)
}

// errNoOverlay is a spy asked for without its overlay function.
func errNoOverlay(what string) error {
	return fmt.Errorf("the build was asked for %s without BuildOptions.Overlays.%s", what, what)
}

func mergeOverlays(a, b map[string]string) map[string]string {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// spyOverlay returns the overlay entries of the runtime spy name (copyspy,
// allocspy): the runtime files patch writes into a folder of its own, and a
// file for package main that links the agent's table reader, agent/table.
func spyOverlay(work, pkgDir, name, table string, patch func(dir string) (map[string]string, error)) (map[string]string, error) {
	rtDir := filepath.Join(work, name)
	if err := os.Mkdir(rtDir, 0o755); err != nil {
		return nil, err
	}
	ov, err := patch(rtDir)
	if err != nil {
		return nil, err
	}
	return ov, addMainFile(ov, work, pkgDir, "zz_perfspy_"+name+".go", agentImport+"/"+table)
}

// repeatablePatches are the runtime's random choices that change the
// instructions a request runs, and what they become. Each replacement
// stays on its line, so that line numbers do not move.
var repeatablePatches = []struct {
	file     string
	old, new string
	count    int
}{
	// The seed of the generator behind every other: map hash seeds, the
	// per-thread generators, the heap profile's sampling.
	{"rand.go", "\tglobalRand.state.Init(*seed)\n", "\tfor i := range seed { seed[i] = byte(i + 1) }; globalRand.state.Init(*seed)\n", 1},
	// The type-assertion and type-switch caches are filled on about one
	// miss in 1024, drawn from the generator of whichever thread runs the
	// code: filled on the first miss instead, during the warm-up.
	{"iface.go", "\tif cheaprand()&1023 != 0 {\n", "\tif cheaprand()&0 != 0 {\n", 2},
	{"iface.go", "\tif cheaprand()&uint32(oldC.Mask) != 0 {\n", "\tif cheaprand()&0 != 0 {\n", 2},
	// A goroutine entering a system call wakes sysmon from its deep sleep,
	// and sysmon then runs on a wall clock: under callgrind it took locks
	// the request's thread held, or took the P from a system call, at
	// points that moved from run to run. It stays asleep until a timer
	// is due instead.
	{"proc.go", "\tif sched.sysmonwait.Load() {\n\t\tsystemstack(entersyscallWakeSysmon)\n", "\tif false && sched.sysmonwait.Load() {\n\t\tsystemstack(entersyscallWakeSysmon)\n", 1},
	// sysmon asks a goroutine that ran 10 ms (of the wall clock, 50 times
	// slower under callgrind) to yield at its next call: the goroutines
	// that then ran (the sweeper, timers) on its thread were counted as
	// its own, one time in two (6,410 instructions in a benchmark's run).
	// It runs until it blocks instead.
	{"proc.go", "\t\t} else if pd.schedwhen+forcePreemptNS <= now {\n", "\t\t} else if false && pd.schedwhen+forcePreemptNS <= now {\n", 1},
}

// repeatableOverlay adds to the overlay the runtime files of
// repeatablePatches, patched, so that runs of one binary under callgrind
// take the same choices.
func repeatableOverlay(ov, spies map[string]string, goroot, work string) error {
	// A runtime file the spies edit too (proc.go: the request mark) gets
	// both edits in the spies' overlay; the plain one (a build without the
	// spies) gets this one's alone.
	for _, tier := range []struct {
		prefix string
		dst    map[string]string
		from   map[string]string
	}{{"repeatable_", ov, nil}, {"repeatable_spied_", spies, spies}} {
		files := map[string]string{}
		for _, p := range repeatablePatches {
			path := filepath.Join(goroot, "src", "runtime", p.file)
			if tier.from != nil && tier.from[path] == "" {
				continue
			}
			src, ok := files[path]
			if !ok {
				read := path
				if tier.from != nil {
					read = tier.from[path]
				}
				b, err := os.ReadFile(read)
				if err != nil {
					return fmt.Errorf("repeatable runtime: %w", err)
				}
				src = string(b)
			}
			if n := strings.Count(src, p.old); n != p.count {
				return fmt.Errorf("repeatable runtime: %s has %d of %q, want %d: not the Go 1.26 runtime", path, n, strings.TrimSpace(p.old), p.count)
			}
			files[path] = strings.ReplaceAll(src, p.old, p.new)
		}
		for path, src := range files {
			dst := filepath.Join(work, tier.prefix+filepath.Base(path))
			if err := os.WriteFile(dst, []byte(src), 0o644); err != nil {
				return err
			}
			tier.dst[path] = dst
		}
	}
	return nil
}

// addMainFile adds to the overlay a file of package main that imports pkg.
func addMainFile(ov map[string]string, work, pkgDir, name, pkg string) error {
	src := filepath.Join(work, name)
	if err := os.WriteFile(src, []byte("package main\n\nimport _ \""+pkg+"\"\n"), 0o644); err != nil {
		return err
	}
	ov[filepath.Join(pkgDir, name)] = src
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "; ")
}

// fetchVersioned downloads module/path/cmd/x@version and returns the
// package's directory in a writable copy of its module: the go command
// refuses overlays inside the module cache.
func fetchVersioned(ctx context.Context, spec, work, cacheRoot string, anyPackage bool, logf func(string, ...any)) (string, error) {
	path, version, _ := strings.Cut(spec, "@")
	if path == "" || version == "" || strings.Contains(version, "@") {
		return "", fmt.Errorf("target %q: want module/path/cmd/x@version", spec)
	}
	// An exact version's resolution is kept: go get and go list cost a
	// run at a fixed -benchtime more than its benchmarks do.
	keep := resolvedPath(cacheRoot, spec)
	r, ok := loadResolved(keep)
	if !ok {
		logf("fetching %s", spec)
		var err error
		if r, err = resolve(ctx, spec, work); err != nil {
			return "", err
		}
		saveResolved(keep, r)
	}
	if r.Name != "main" && !anyPackage {
		return "", &NotMainError{Path: spec, Name: r.Name}
	}
	rel, err := filepath.Rel(r.ModDir, r.Dir)
	if err != nil {
		return "", err
	}
	key := strings.NewReplacer("/", "_", "@", "_").Replace(r.ModPath + "@" + r.ModVersion)
	// The copy is checked against the module cache (which the go command
	// verifies) on every build, and written anew when it differs.
	files, err := cache.ReadTree(r.ModDir)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", r.ModDir, err)
	}
	if d := mainOnlyDirectives(files["go.mod"]); len(d) > 0 {
		return "", fmt.Errorf("target %s: the go.mod of %s@%s has %s, which go install %s refuses too: the module builds one way as a dependency and another as the main module. Measure a checkout of it: clone its repository at %s and run probe run on the package's folder in it", spec, r.ModPath, r.ModVersion, strings.Join(d, ", "), spec, r.ModVersion)
	}
	if _, ok := files["go.mod"]; !ok {
		files["go.mod"] = []byte("module " + r.ModPath + "\n")
	}
	dst := filepath.Join(cacheRoot, "src", key)
	if err := cache.Install(dst, files); err != nil {
		return "", fmt.Errorf("copying %s: %w", r.ModDir, err)
	}
	return filepath.Join(dst, rel), nil
}

// writeWrapModule writes an empty module in which a module/path@version
// target is fetched: it requires nothing else, so the target's module is
// resolved as go install would.
func writeWrapModule(work string) error {
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte("module perfspy.invalid/wrap\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(work, "main.go"), []byte("package wrap\n"), 0o644)
}

// gitCommit returns the short commit of dir's repository and whether the
// work tree has changes; "" when dir is not in a repository.
func gitCommit(ctx context.Context, dir string) (string, bool) {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "", false
	}
	st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), err == nil && len(bytes.TrimSpace(st)) > 0
}

// defaultTargetDir is the default target's folder: in perfspy's source
// tree when probe has one, else the copy embedded in probe, written to the
// cache as a module of its own.
func defaultTargetDir(cacheRoot string) (string, error) {
	if root, err := srcroot.Dir(); err == nil {
		return filepath.Join(root, filepath.FromSlash(DefaultTarget)), nil
	}
	dir := filepath.Join(cacheRoot, "default-target", "httpjson")
	files := map[string][]byte{"go.mod": []byte("module perfspy.invalid/httpjson\n\ngo 1.22\n")}
	ents, err := perfspy.DefaultTarget.ReadDir("targets/httpjson")
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		b, err := perfspy.DefaultTarget.ReadFile("targets/httpjson/" + e.Name())
		if err != nil {
			return "", err
		}
		files[e.Name()] = b
	}
	return dir, cache.Install(dir, files)
}

// ProgramName is the name go install gives the program of a package
// path: its last element, or the one before a major version suffix
// (github.com/oauth2-proxy/oauth2-proxy/v7 is oauth2-proxy, not v7).
func ProgramName(pkgPath string) string {
	elems := strings.Split(strings.Trim(filepath.ToSlash(pkgPath), "/"), "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		return elems[len(elems)-2]
	}
	return last
}

// mainOnlyDirectives lists a go.mod's replace and exclude directives,
// which apply only when the module is the main one: go install
// module@version refuses a module that has them.
func mainOnlyDirectives(gomod []byte) []string {
	var out []string
	block := ""
	for _, line := range strings.Split(string(gomod), "\n") {
		line, _, _ = strings.Cut(line, "//")
		line = strings.TrimSpace(line)
		switch {
		case block != "" && line == ")":
			block = ""
		case block != "" && line != "":
			out = append(out, block+" "+line)
		case line == "replace (" || line == "exclude (":
			block = strings.TrimSuffix(line, " (")
		case strings.HasPrefix(line, "replace ") || strings.HasPrefix(line, "exclude "):
			out = append(out, line)
		}
	}
	return out
}
