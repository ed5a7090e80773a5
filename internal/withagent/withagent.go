// Package withagent sets up the go command to build a target with the
// probe agent added and nothing else changed, and checks afterwards that
// this held: the measured binary's build list is the plain build's plus the
// agent module only.
//
// The agent is a module of its own (agentmod) with no requirements, so
// adding it cannot move any other module's version under minimal version
// selection. How it is added depends on how the target builds:
//
//   - module mode: a copy of the target's go.mod (-modfile) that requires
//     the agent and replaces it with its folder in the cache;
//   - vendor mode: a shadow of the module root (symbolic links to every
//     entry) whose vendor/ also holds the agent and lists it in
//     vendor/modules.txt; the go command reads that file from disk, not
//     through -overlay, so the module root itself must be a different
//     folder;
//   - workspace mode (go.work): a copy of the workspace file that also
//     uses the agent's folder;
//   - perfspy's own module: the agent's packages are already there.
package withagent

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/perfspy/perfspy/internal/agentmod"
	"github.com/perfspy/perfspy/internal/cache"
	"github.com/perfspy/perfspy/internal/contain"
	"github.com/perfspy/perfspy/schema"
)

// Modes, as BuildCheck.Mode names them (package schema's).
const (
	ModeModule    = schema.ModeModule
	ModeVendor    = schema.ModeVendor
	ModeWorkspace = schema.ModeWorkspace
	ModeSelf      = schema.ModeSelf
	ModeTest      = schema.ModeTest
)

// SelfModule is perfspy's module path.
const SelfModule = "github.com/perfspy/perfspy"

// Target is a main package and the module that builds it.
type Target struct {
	ModRoot string   // folder holding the target's go.mod
	ModPath string   // the target's module path
	PkgDir  string   // folder of the main package
	Tags    []string // build tags of both builds
	Env     []string // environment of the go command (nil: os.Environ())
	// ModFlag is passed to both builds as -mod=ModFlag when set.
	ModFlag string
	// Test builds the package's test binary (go test -c): any package
	// with tests, and no agent module.
	Test bool
}

// Setup is how to run go build for the target with the agent in.
type Setup struct {
	Mode   string
	Dir    string   // where go build runs
	PkgDir string   // the main package's folder as that build sees it (overlay keys)
	Pkg    string   // the package argument, relative to Dir
	Flags  []string // go build flags to add
	Env    []string // the go command's environment
	Agent  *agentmod.Module
	Plain  []schema.Module // the plain build's modules, from go list
	// Toolchain is the go environment of the toolchain that builds in the
	// target's folder (after any GOTOOLCHAIN switch): its runtime is the
	// one the runtime overlays patch.
	Toolchain Toolchain
}

// Toolchain is what `go env` says of the toolchain that builds.
type Toolchain struct {
	GOROOT, GOARCH, GOEXPERIMENT, GOVERSION string
}

// NotMainError is a target folder whose package is not main.
type NotMainError struct {
	Path string
	Name string // the package's name, or the names found
}

func (e *NotMainError) Error() string {
	return fmt.Sprintf("%s is not a main package (package %s)", e.Path, e.Name)
}

// Prepare lists the plain build's modules and sets up the build with the
// agent. work is a private folder that lives until the build is done;
// cache keeps the agent module between runs.
func Prepare(ctx context.Context, t Target, work, cache string) (*Setup, error) {
	env := t.Env
	if env == nil {
		env = os.Environ()
	}
	rel, err := filepath.Rel(t.ModRoot, t.PkgDir)
	if err != nil {
		return nil, err
	}
	s := &Setup{Dir: t.ModRoot, PkgDir: t.PkgDir, Pkg: "./" + filepath.ToSlash(rel), Env: env}
	if t.ModFlag != "" {
		s.Flags = append(s.Flags, "-mod="+t.ModFlag)
	}
	if t.Test {
		err = checkTests(ctx, t, s)
	} else {
		err = checkMain(ctx, t, s)
	}
	if err != nil {
		return nil, err
	}
	if !t.Test {
		if s.Plain, err = plainList(ctx, t, s); err != nil {
			return nil, err
		}
	}
	out, err := goOut(ctx, t.ModRoot, env, "env", "GOWORK", "GOROOT", "GOARCH", "GOEXPERIMENT", "GOVERSION")
	if err != nil {
		return nil, err
	}
	v := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(v) != 5 {
		return nil, fmt.Errorf("go env: unexpected output %q", out)
	}
	gowork := v[0]
	s.Toolchain = Toolchain{GOROOT: v[1], GOARCH: v[2], GOEXPERIMENT: v[3], GOVERSION: v[4]}
	// The toolchain go build would use (go.mod's go and toolchain lines,
	// GOTOOLCHAIN); one fetched into the module cache builds from a
	// private GOROOT, which takes overlays.
	if s.Env, s.Toolchain, err = switchedToolchain(ctx, t.ModRoot, env, s.Toolchain); err != nil {
		return nil, err
	}
	if t.Test {
		s.Mode = ModeTest
		return s, nil
	}
	if t.ModPath == SelfModule {
		s.Mode = ModeSelf
		return s, nil
	}
	for _, m := range s.Plain {
		if m.Path == SelfModule || m.Path == agentmod.Path {
			return nil, fmt.Errorf("%s requires %s itself: probe cannot add its own agent module beside that version; measure it from a module that does not", t.PkgDir, m.Path)
		}
	}
	if s.Agent, err = agentmod.Write(cache); err != nil {
		return nil, fmt.Errorf("writing the agent module: %w", err)
	}
	switch {
	case gowork != "" && gowork != "off":
		s.Mode = ModeWorkspace
		return s, s.workspace(ctx, gowork, work)
	case vendorMode(t, env):
		s.Mode = ModeVendor
		return s, s.vendor(t, work)
	}
	s.Mode = ModeModule
	return s, s.module(t, work)
}

// checkMain refuses a folder that does not hold exactly one main package,
// in the user's words rather than the go command's.
func checkMain(ctx context.Context, t Target, s *Setup) error {
	out, err := goOut(ctx, s.Dir, s.Env, s.listArgs("-e", "-f", "{{.Name}}\t{{if .Error}}{{.Error}}{{end}}")...)
	if err != nil {
		return fmt.Errorf("go list %s: %w", t.PkgDir, err)
	}
	name, perr, _ := strings.Cut(strings.TrimSpace(out), "\t")
	if perr != "" {
		// "found packages a (a.go) and b (b.go) in DIR"
		if i := strings.Index(perr, "found packages "); i >= 0 {
			var names []string
			for _, f := range strings.Fields(perr[i+len("found packages "):]) {
				if !strings.HasPrefix(f, "(") && f != "and" && !strings.HasPrefix(f, "in") && !strings.HasPrefix(f, "/") {
					names = append(names, f)
				}
			}
			return &NotMainError{Path: t.PkgDir, Name: strings.Join(names, ", ")}
		}
		return fmt.Errorf("%s: %s", t.PkgDir, perr)
	}
	if name != "main" {
		return &NotMainError{Path: t.PkgDir, Name: name}
	}
	return nil
}

// checkTests refuses a folder whose package has no test files, in the
// user's words.
func checkTests(ctx context.Context, t Target, s *Setup) error {
	out, err := goOut(ctx, s.Dir, s.Env, s.listArgs("-e", "-f", "{{.Name}}\t{{len .TestGoFiles}}\t{{len .XTestGoFiles}}\t{{if .Error}}{{.Error}}{{end}}")...)
	if err != nil {
		return fmt.Errorf("go list %s: %w", t.PkgDir, err)
	}
	f := strings.SplitN(strings.TrimSpace(out), "\t", 4)
	if len(f) == 4 && f[3] != "" {
		return fmt.Errorf("%s: %s", t.PkgDir, f[3])
	}
	if len(f) < 3 || f[1] == "0" && f[2] == "0" {
		return fmt.Errorf("%s has no test files: its benchmarks are in _test.go files", t.PkgDir)
	}
	return nil
}

func (s *Setup) listArgs(args ...string) []string {
	a := append([]string{"list"}, s.Flags...)
	return append(append(a, args...), s.Pkg)
}

// plainList lists the modules that provide the packages of a plain build:
// what `go version -m` shows for it.
func plainList(ctx context.Context, t Target, s *Setup) ([]schema.Module, error) {
	// The workspace's other modules are main modules too; the binary
	// records them as (devel).
	args := []string{"-deps", "-f", "{{with .Module}}{{.Path}}\t{{if .Main}}(devel){{else}}{{.Version}}{{end}}\t{{with .Replace}}{{.Path}}\t{{.Version}}{{end}}{{end}}"}
	if len(t.Tags) > 0 {
		args = append(args, "-tags="+strings.Join(t.Tags, ","))
	}
	out, err := goOut(ctx, s.Dir, s.Env, s.listArgs(args...)...)
	if err != nil {
		return nil, fmt.Errorf("listing the plain build's modules: %w", err)
	}
	seen := map[string]schema.Module{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 2 || f[0] == "" || f[0] == t.ModPath {
			continue
		}
		m := schema.Module{Path: f[0], Version: f[1]}
		if len(f) >= 4 && f[2] != "" {
			m.Replace = replaceString(f[2], f[3])
		}
		seen[m.Path] = m
	}
	return sorted(seen), nil
}

func replaceString(path, version string) string {
	if version == "" {
		return path
	}
	return path + " " + version
}

func sorted(m map[string]schema.Module) []schema.Module {
	out := make([]schema.Module, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// module writes the -modfile: the target's go.mod, requiring and replacing
// the agent module, beside a copy of its go.sum.
func (s *Setup) module(t Target, work string) error {
	b, err := os.ReadFile(filepath.Join(t.ModRoot, "go.mod"))
	if err != nil {
		return err
	}
	b = append(b, fmt.Sprintf("\nrequire %s %s\n\nreplace %s => %s\n", agentmod.Path, s.Agent.Version, agentmod.Path, s.Agent.Dir)...)
	dir := filepath.Join(work, "modfile")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	modfile := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(modfile, b, 0o644); err != nil {
		return err
	}
	if err := copyIfExists(filepath.Join(t.ModRoot, "go.sum"), filepath.Join(dir, "go.sum")); err != nil {
		return err
	}
	s.Flags = append(s.Flags, "-modfile="+modfile)
	return nil
}

// vendorMode tells whether the go command builds the target from vendor/.
func vendorMode(t Target, env []string) bool {
	if t.ModFlag != "" {
		return t.ModFlag == "vendor"
	}
	if _, err := os.Stat(filepath.Join(t.ModRoot, "vendor", "modules.txt")); err != nil {
		return false
	}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "GOFLAGS="); ok && (strings.Contains(v, "-mod=mod") || strings.Contains(v, "-mod=readonly")) {
			return false
		}
	}
	return true
}

// vendor builds a shadow of the module root in work: links to every entry
// but go.mod and vendor/, a go.mod that also requires the agent, and a
// vendor/ of links plus the agent's packages and their lines in
// modules.txt.
func (s *Setup) vendor(t Target, work string) error {
	shadow := filepath.Join(work, "shadow")
	if err := linkEntries(t.ModRoot, shadow, "go.mod", "vendor"); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(t.ModRoot, "go.mod"))
	if err != nil {
		return err
	}
	gomod = append(gomod, fmt.Sprintf("\nrequire %s %s\n", agentmod.Path, s.Agent.Version)...)
	if err := os.WriteFile(filepath.Join(shadow, "go.mod"), gomod, 0o644); err != nil {
		return err
	}
	vsrc, vdst := filepath.Join(t.ModRoot, "vendor"), filepath.Join(shadow, "vendor")
	if err := linkEntries(vsrc, vdst, "modules.txt"); err != nil {
		return err
	}
	// The agent's folder, github.com/perfspy/perfspy/agent: each folder on
	// the way is made real, its other entries linked.
	dst := vdst
	for _, part := range strings.Split(agentmod.Path, "/") {
		vsrc, dst = filepath.Join(vsrc, part), filepath.Join(dst, part)
		if st, err := os.Lstat(dst); err == nil && st.Mode()&os.ModeSymlink != 0 {
			if err := os.Remove(dst); err != nil {
				return err
			}
		}
		if err := linkEntries(vsrc, dst, "-"); err != nil {
			return err
		}
	}
	files := map[string][]byte{}
	for n, b := range s.Agent.Files {
		if n != "go.mod" {
			files[n] = b
		}
	}
	if err := cache.WriteTree(dst, files); err != nil {
		return err
	}
	mt, err := os.ReadFile(filepath.Join(t.ModRoot, "vendor", "modules.txt"))
	if err != nil {
		return err
	}
	var add bytes.Buffer
	fmt.Fprintf(&add, "# %s %s\n## explicit; go %s\n", agentmod.Path, s.Agent.Version, agentmod.GoLine)
	for _, p := range agentmod.Packages(s.Agent.Files) {
		fmt.Fprintln(&add, p)
	}
	if len(mt) > 0 && mt[len(mt)-1] != '\n' {
		mt = append(mt, '\n')
	}
	if err := os.WriteFile(filepath.Join(vdst, "modules.txt"), append(mt, add.Bytes()...), 0o644); err != nil {
		return err
	}
	rel, err := filepath.Rel(t.ModRoot, t.PkgDir)
	if err != nil {
		return err
	}
	s.Dir, s.PkgDir = shadow, filepath.Join(shadow, rel)
	return nil
}

// linkEntries makes dst a folder of links to src's entries, except the
// names in skip. src may not exist ("-" skips nothing).
func linkEntries(src, dst string, skip ...string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
next:
	for _, e := range ents {
		for _, n := range skip {
			if e.Name() == n {
				continue next
			}
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// workFile is what `go work edit -json` prints.
type workFile struct {
	Go        string
	Toolchain string
	Godebug   []struct{ Key, Value string }
	Use       []struct{ DiskPath string }
	Replace   []struct {
		Old, New struct{ Path, Version string }
	}
}

// workspace writes a copy of the workspace file that also uses the agent
// module, with every folder made absolute, beside a copy of go.work.sum.
func (s *Setup) workspace(ctx context.Context, gowork, work string) error {
	out, err := goOut(ctx, s.Dir, s.Env, "work", "edit", "-json", gowork)
	if err != nil {
		return fmt.Errorf("reading %s: %w", gowork, err)
	}
	var wf workFile
	if err := json.Unmarshal([]byte(out), &wf); err != nil {
		return fmt.Errorf("reading %s: %w", gowork, err)
	}
	base := filepath.Dir(gowork)
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	var b strings.Builder
	if wf.Go != "" {
		fmt.Fprintf(&b, "go %s\n", wf.Go)
	}
	if wf.Toolchain != "" {
		fmt.Fprintf(&b, "toolchain %s\n", wf.Toolchain)
	}
	for _, g := range wf.Godebug {
		fmt.Fprintf(&b, "godebug %s=%s\n", g.Key, g.Value)
	}
	for _, u := range wf.Use {
		fmt.Fprintf(&b, "use %q\n", abs(u.DiskPath))
	}
	fmt.Fprintf(&b, "use %q\n", s.Agent.Dir)
	for _, r := range wf.Replace {
		old := r.Old.Path
		if r.Old.Version != "" {
			old += " " + r.Old.Version
		}
		if r.New.Version == "" {
			fmt.Fprintf(&b, "replace %s => %q\n", old, abs(r.New.Path))
		} else {
			fmt.Fprintf(&b, "replace %s => %s %s\n", old, r.New.Path, r.New.Version)
		}
	}
	dir := filepath.Join(work, "workspace")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "go.work")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := copyIfExists(gowork+".sum", path+".sum"); err != nil {
		return err
	}
	s.Env = append(append([]string(nil), s.Env...), "GOWORK="+path)
	return nil
}

func copyIfExists(src, dst string) error {
	b, err := os.ReadFile(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// goOut runs the go command in dir and returns its standard output; the
// error carries its standard error.
func goOut(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	if err := RunGo(ctx, dir, env, &out, &errb, args...); err != nil {
		return out.String(), fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// lookGo finds the go command on env's PATH (the build's, which may lead
// to a private GOROOT), or on this process's when env has none.
func lookGo(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if p, ok := strings.CutPrefix(env[i], "PATH="); ok {
			for _, d := range filepath.SplitList(p) {
				if d == "" || !filepath.IsAbs(d) {
					continue
				}
				if st, err := os.Stat(filepath.Join(d, "go")); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
					return filepath.Join(d, "go")
				}
			}
			break
		}
	}
	return "go"
}

// RunGo runs the go command in dir. It leads a process group of its own:
// when ctx ends (Ctrl-C), the go command and the compilers it started are
// interrupted, as a terminal would, so that it removes its temporary
// work folder, and killed 10 s later if any is left.
func RunGo(ctx context.Context, dir string, env []string, stdout, stderr io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, lookGo(env), args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	contain.DieWithParent(cmd.SysProcAttr)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second
	started := contain.Starting()
	if err := cmd.Start(); err != nil {
		started()
		return err
	}
	// Not an orphan of a target's group (contain), though it leads a
	// process group of its own and may start while a target runs.
	forget := contain.Keep(cmd.Process.Pid)
	started()
	defer forget()
	err := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group
	return err
}

// CheckErr says what makes the measured binary differ from the user's, nil
// when nothing but the agent module was added.
func CheckErr(c *schema.BuildCheck) error {
	var lines []string
	for _, ch := range c.Changed {
		lines = append(lines, fmt.Sprintf("%s: %s in a plain build, %s in the measured binary", ch.Path, ch.Plain, ch.Probed))
	}
	for _, m := range c.Added {
		if m.Path != agentmod.Path {
			lines = append(lines, fmt.Sprintf("%s: not in a plain build, added to the measured binary", m))
		}
	}
	for _, m := range c.Removed {
		lines = append(lines, fmt.Sprintf("%s: in a plain build, missing from the measured binary", m))
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("the measured binary's modules differ from a plain build's; it would not be the binary you ship:\n  %s", strings.Join(lines, "\n  "))
}

// CheckBinary compares the build list recorded in binary with plain.
func CheckBinary(binary, mode string, plain []schema.Module) (*schema.BuildCheck, error) {
	got, err := BinaryModules(binary)
	if err != nil {
		return nil, err
	}
	c := Compare(plain, got)
	c.Binary, c.Mode = binary, mode
	return c, nil
}

// BinaryModules reads the build list recorded in binary.
func BinaryModules(binary string) ([]schema.Module, error) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the build list of %s: %w", binary, err)
	}
	got := []schema.Module{}
	for _, d := range bi.Deps {
		m := schema.Module{Path: d.Path, Version: d.Version}
		if d.Replace != nil {
			m.Replace = replaceString(d.Replace.Path, d.Replace.Version)
		}
		got = append(got, m)
	}
	return got, nil
}

// Compare compares two build lists by module path. A replacement by a
// folder is compared as a folder, not by its spelling: the two builds may
// name it from different places.
func Compare(plain, probed []schema.Module) *schema.BuildCheck {
	c := &schema.BuildCheck{Modules: len(plain), Added: []schema.Module{}, Changed: []schema.ModuleChange{}}
	pm := map[string]schema.Module{}
	for _, m := range plain {
		pm[m.Path] = m
	}
	seen := map[string]bool{}
	for _, m := range probed {
		seen[m.Path] = true
		p, ok := pm[m.Path]
		if !ok {
			c.Added = append(c.Added, m)
			continue
		}
		if p.Version != m.Version || !sameReplace(p.Replace, m.Replace) {
			c.Changed = append(c.Changed, schema.ModuleChange{Path: m.Path, Plain: p.String(), Probed: m.String()})
		}
	}
	for _, m := range plain {
		if !seen[m.Path] {
			c.Removed = append(c.Removed, m)
		}
	}
	sort.Slice(c.Added, func(i, j int) bool { return c.Added[i].Path < c.Added[j].Path })
	sort.Slice(c.Changed, func(i, j int) bool { return c.Changed[i].Path < c.Changed[j].Path })
	sort.Slice(c.Removed, func(i, j int) bool { return c.Removed[i].Path < c.Removed[j].Path })
	return c
}

func sameReplace(a, b string) bool {
	if a == b {
		return true
	}
	return isFolder(a) && isFolder(b)
}

// isFolder tells a replacement by a folder from one by a module version.
// A binary's build information records a folder's version as (devel).
func isFolder(r string) bool {
	r = strings.TrimSuffix(r, " (devel)")
	return r != "" && !strings.Contains(r, " ")
}
