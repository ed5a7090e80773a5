package cost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// benchPackages are the shapes 'probe run -bench' is held to: the
// standard library's fmt (many fast benchmarks), valyala/fastjson (a few
// heavy ones) and rs/zerolog (many allocation-heavy ones).
var benchPackages = []string{"fmt", "github.com/valyala/fastjson@v1.6.10", "github.com/rs/zerolog@v1.35.1"}

// BenchCmd sets 'probe run -bench .' beside 'go test -run ^$ -bench .
// -benchmem' on each package, wall time once built (a first run of each,
// untimed, builds), in interleaved rounds, and prints the ratio against
// the goal of 1.5.
var BenchCmd = Bench{Name: "bench", Run: func(ctx context.Context, env Env) error {
	_, tmp, probe, err := probeWorkdir(ctx)
	if tmp != "" {
		defer os.RemoveAll(tmp)
	}
	if err != nil {
		return err
	}
	// go test runs a module's package from a module that requires it.
	mod := filepath.Join(tmp, "mod")
	if err := os.Mkdir(mod, 0o755); err != nil {
		return err
	}
	if err := runQuiet(ctx, mod, "go", "mod", "init", "perfspy.invalid/costbench"); err != nil {
		return err
	}
	type arms struct{ gotest, probe []float64 }
	got := map[string]*arms{}
	for _, pkg := range benchPackages {
		path, version, _ := strings.Cut(pkg, "@")
		if version != "" {
			if err := runQuiet(ctx, mod, "go", "get", pkg); err != nil {
				return err
			}
		}
		gotest := func(bench string) error {
			return runQuiet(ctx, mod, "go", "test", "-run", "^$", "-bench", bench, "-benchmem", path)
		}
		probeRun := func(bench string) error {
			return runQuiet(ctx, mod, probe, "run", "-q", "-bench", bench, "-out", filepath.Join(tmp, "out"), pkg)
		}
		// Built once, untimed: a benchmark name that matches nothing.
		gotest("^NoSuchBenchmark$")
		probeRun("^NoSuchBenchmark$")
		a := &arms{}
		got[pkg] = a
		type arm struct {
			name string
			run  func(string) error
			secs *[]float64
		}
		order := []arm{{"go test", gotest, &a.gotest}, {"probe run -bench", probeRun, &a.probe}}
		for r := 0; r < env.Rounds; r++ {
			for _, x := range order {
				os.RemoveAll(filepath.Join(tmp, "out"))
				fmt.Fprintf(env.Stderr, "round %d/%d: %s, %s\n", r+1, env.Rounds, pkg, x.name)
				start := time.Now()
				if err := x.run("."); err != nil {
					return err
				}
				*x.secs = append(*x.secs, time.Since(start).Seconds())
			}
			order[0], order[1] = order[1], order[0] // interleaved: AB, BA, ...
		}
	}
	fmt.Fprintf(env.Stdout, "probe run -bench . against go test -run '^$' -bench . -benchmem, wall time once built, median of %d interleaved rounds\n", env.Rounds)
	fmt.Fprintf(env.Stdout, "  %-40s %12s %12s %8s\n", "package", "go test s", "probe s", "ratio")
	for _, pkg := range benchPackages {
		g, p := median(got[pkg].gotest), median(got[pkg].probe)
		fmt.Fprintf(env.Stdout, "  %-40s %12.1f %12.1f %7.2fx (goal at most 1.5)\n", pkg, g, p, p/g)
	}
	return nil
}}

// runQuiet runs a command in dir, its output kept for the error.
func runQuiet(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return nil
}
