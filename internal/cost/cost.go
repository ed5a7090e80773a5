// Package cost measures what perfspy's instruments cost, side by side with
// the plain runtime or the reference tool, in interleaved rounds: the
// nanoseconds the runtime overlays add per memmove and per allocation, the
// throughput of targets/httpjson with each counter on, the off-CPU window
// against fgprof, allocdiff against go tool pprof, flame against
// flamegraph.pl. It prints medians and ratios; it is not a timed test.
//
// Each command (probe cost, copyspy cost, allocspy cost) passes the
// benchmarks it owns, so that it links only what they measure: the ones
// that measure a probe run start the probe command and read its
// summary.json, they do not link probe.
package cost

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/internal/synthprof"
)

// Env is what a benchmark is given.
type Env struct {
	Stdout, Stderr io.Writer
	Rounds         int
	Duration       time.Duration // load per window, for benchmarks that run probe
	Idle           int           // idle goroutines in the target, for offcpu
	// Shapes are the inputs of the readers' benchmarks (flame,
	// allocdiff); none is every shape.
	Shapes []string
	// Packages are bench's cases, by any part of their package path;
	// none is every case.
	Packages []string
	// Busy is how many CPU-bound processes run beside bench's rounds.
	Busy int
}

// Bench is one benchmark of a command.
type Bench struct {
	Name string
	Run  func(ctx context.Context, env Env) error
}

// Command is a command's cost benchmarks: 'Name cost' runs Defaults (a
// comma-separated list) unless -what names others of Benches.
type Command struct {
	Name     string
	Benches  []Bench
	Defaults string
}

// Main runs 'NAME cost' with args. It returns the exit code.
func Main(ctx context.Context, c Command, args []string, stdout, stderr io.Writer) int {
	name, benches, defaults := c.Name, c.Benches, c.Defaults
	fs := flag.NewFlagSet(name+" cost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names []string
	for _, b := range benches {
		names = append(names, b.Name)
	}
	env := Env{Stdout: stdout, Stderr: stderr}
	fs.IntVar(&env.Rounds, "rounds", 5, "interleaved rounds")
	what := fs.String("what", defaults, "benchmarks to run: "+strings.Join(names, ", "))
	fs.DurationVar(&env.Duration, "duration", 3*time.Second, "load per window, for the benchmarks that run probe")
	fs.IntVar(&env.Idle, "idle", 10000, "offcpu: idle goroutines in the target")
	pkgs := fs.String("pkg", "", "bench: the `cases` to run, comma-separated, each by any part of its package path (logrus, gin); default all")
	fs.IntVar(&env.Busy, "busy", 0, "bench: CPU-bound processes to run beside every round (a busy machine; the fixed-benchtime goals are then 2.5x, not 2.0x)")
	shapes := fs.String("shape", "", "flame, allocdiff: the `shapes` of input, comma-separated: deep, random-walk, shallow-1M, locations-1M, folded (flame only); default all")
	if code, ok := cmdmain.Parse(fs, args); !ok {
		return code
	}
	if *pkgs != "" {
		env.Packages = strings.Split(*pkgs, ",")
	}
	if env.Rounds < 1 || env.Busy < 0 || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s cost: -rounds must be at least 1, -busy at least 0, and no arguments\n", name)
		return cmdmain.Usage
	}
	if *shapes != "" {
		env.Shapes = strings.Split(*shapes, ",")
		for _, sh := range env.Shapes {
			if _, ok := synthprof.ShapeNamed(sh); !ok {
				fmt.Fprintf(stderr, "%s cost: -shape %q: want deep, random-walk, shallow-1M, locations-1M or folded\n", name, sh)
				return cmdmain.Usage
			}
		}
	}
	var run []Bench
	for _, w := range strings.Split(*what, ",") {
		found := false
		for _, b := range benches {
			if b.Name == w {
				run, found = append(run, b), true
			}
		}
		if !found {
			fmt.Fprintf(stderr, "%s cost: unknown benchmark %q (have %s)\n", name, w, strings.Join(names, ", "))
			return cmdmain.Usage
		}
	}
	for _, b := range run {
		if err := b.Run(ctx, env); err != nil {
			fmt.Fprintf(stderr, "%s cost: %s: %v\n", name, b.Name, err)
			return cmdmain.Failed
		}
	}
	return cmdmain.OK
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
