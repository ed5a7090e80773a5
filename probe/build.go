package probe

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/internal/outfile"
	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/report"
)

// BuildConfig is probe build's: a target's main package built with the
// agent and the runtime overlays into a binary that runs on its own.
type BuildConfig struct {
	Target string
	Out    string // the binary; "" is the program's name in the current folder
}

// BuildResult is what probe build made.
type BuildResult struct {
	Path   string
	Binary *withagent.Binary
}

// Build builds cfg.Target as probe run builds it (the agent added, the
// build list checked against a plain build's, allocspy, copyspy and the
// request marks), and writes the binary to cfg.Out. Unconfigured, the
// binary measures nothing: the agent listens only when probe gives it a
// socket, and the recorders are off (docs/live.md).
func Build(ctx context.Context, cfg BuildConfig, logf func(string, ...any)) (*BuildResult, error) {
	tgt, err := withagent.Build(ctx, cfg.Target, withagent.BuildOptions{Copies: true, Allocs: true, Requests: true, Live: true, Overlays: spyOverlays(seams{})}, logf)
	if err != nil {
		return nil, err
	}
	out := cfg.Out
	if out == "" {
		out = tgt.Name
	}
	if st, err := os.Stat(out); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("-o %s: not a regular file", out)
	}
	b, err := os.ReadFile(tgt.Binary)
	if err != nil {
		return nil, err
	}
	if err := outfile.Write(out, b, 0o755); err != nil {
		return nil, fmt.Errorf("-o %s: %w", out, err)
	}
	return &BuildResult{Path: out, Binary: tgt}, nil
}

// mainBuild is probe build.
func mainBuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg BuildConfig
	fs.StringVar(&cfg.Out, "o", "", "write the binary to `file` (default: the program's name, in this folder)")
	quiet := fs.Bool("q", false, "no progress on standard error")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: probe build [-o FILE] [-q] TARGET\n\nBuilds TARGET (a main package: folder, module/path@version) with perfspy's agent and runtime\noverlays, its build list unchanged, into a binary that runs on its own (docs/live.md).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := cmdmain.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "probe build: want one target, got %d\n", fs.NArg())
		fs.Usage()
		return ExitUsage
	}
	cfg.Target = fs.Arg(0)
	logf := func(format string, a ...any) {
		if !*quiet {
			fmt.Fprintf(stderr, "probe: "+format+"\n", a...)
		}
	}
	res, err := Build(ctx, cfg, logf)
	if err != nil {
		return exitCode(stderr, "probe build", err)
	}
	t := res.Binary
	abs, _ := filepath.Abs(res.Path)
	fmt.Fprintf(stdout, "built %s (%s)\n  allocspy %s, copyspy %s, request marks %s, live mode %s\n", abs, t.Spec, onOff(t.Allocs, t.AllocsOff), onOff(t.Copies, t.CopiesOff), onOff(t.Requests, t.RequestsOff), onOff(t.Live, "no recorders"))
	if t.BuildCheck != nil {
		fmt.Fprintf(stdout, "  build list    %s\n", report.BuildLine(t.BuildCheck))
	}
	return ExitOK
}

func onOff(on bool, why string) string {
	if on {
		return "on"
	}
	return "off (" + why + ")"
}
