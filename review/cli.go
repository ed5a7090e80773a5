package review

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/perfspy/perfspy/internal/cmdmain"
)

const usage = `usage: probe review [-base REV] [-head REV] [-config FILE] [-out DIR] [flags]

Measures every server and benchmark of the repository's .perfspy.yml at the
base and head revisions (as probe ab does), applies the file's gates, and
writes review.md (a pull request comment), review.json and annotations.txt.
Each annotation is also printed as a GitHub workflow command (::error or
::warning on the line in the head revision, ::notice for a decrease).
Exit 1 when a gate failed or an item could not be measured (the others
are reported), 2 for a bad configuration, 3 when nothing could be judged.
docs/review.md.

`

// Main is probe review. It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe review", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var opt Options
	q := fs.Bool("q", false, "quiet: no progress lines")
	fs.StringVar(&opt.Base, "base", "", "the base `revision` (default: the merge base with $GITHUB_BASE_REF, or with the default branch)")
	fs.StringVar(&opt.Head, "head", "", "the head `revision` (default HEAD)")
	fs.StringVar(&opt.Config, "config", "", "the configuration `file` (default: .perfspy.yml at the repository's root)")
	fs.StringVar(&opt.Repo, "repo", "", "a `folder` in the repository (default: the working directory)")
	fs.StringVar(&opt.Out, "out", "", "results `folder` (default results/review_BASE_HEAD)")
	fs.StringVar(&opt.Cache, "cache", "", "keep the base revision's exact counts in `DIR`, by commit, Go version, configuration and perfspy version")
	fs.BoolVar(&opt.Timings, "timings", true, "compare timings (both revisions in interleaved rounds); false compares exact counts only, one run per revision")
	fs.IntVar(&opt.Rounds, "rounds", 0, "runs per revision, interleaved (default: the configuration's, else probe ab's 4)")
	fs.DurationVar(&opt.Warmup, "warmup", 0, "each run's warm-up (default: the configuration's, else probe run's)")
	fs.DurationVar(&opt.Duration, "duration", 0, "each run's timing window (default: the configuration's, else probe run's)")
	if code, ok := cmdmain.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "probe review: unexpected argument %q: the servers and benchmarks are in the configuration\n", fs.Arg(0))
		return cmdmain.Usage
	}
	var logw io.Writer = stderr
	if *q {
		logw = nil
	}
	res, err := Review(ctx, opt, logw)
	if res != nil && res.Dir != "" && !errors.Is(err, ErrWrite) {
		for _, a := range res.Annotations {
			fmt.Fprintln(stdout, workflowCommand(a))
		}
		fmt.Fprintf(stdout, "review: %s\nresults: %s\n", res.Verdict, filepath.Join(res.Dir, "review.md"))
	}
	var ce *ConfigError
	switch {
	case err == nil:
		return cmdmain.OK
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "probe review: %v\n", err)
		return cmdmain.Usage
	case errors.Is(err, ErrGate), errors.Is(err, ErrItems):
		fmt.Fprintf(stderr, "probe review: %v\n", err)
		return cmdmain.Failed
	case errors.Is(err, ErrNotJudged):
		fmt.Fprintf(stderr, "probe review: %v\n", err)
		return cmdmain.NotJudged
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "probe review: interrupted: %v\n", err)
		return cmdmain.Failed
	}
	fmt.Fprintf(stderr, "probe review: %v\n", err)
	return cmdmain.Failed
}
