package cost

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// benchCases are the shapes 'probe run -bench' is held to: at go test's
// default benchtime the standard library's fmt (many fast benchmarks),
// valyala/fastjson (a few heavy ones) and rs/zerolog (many
// allocation-heavy ones), at most 1.5x go test; at the fixed benchtime
// reviews use, sirupsen/logrus and gin-gonic/gin, at most 2.0x on a quiet
// machine and 2.5x with a CPU-bound process beside it (-busy).
var benchCases = []benchCase{
	{"fmt", "", 1.5, 1.5},
	{"github.com/valyala/fastjson@v1.6.10", "", 1.5, 1.5},
	{"github.com/rs/zerolog@v1.35.1", "", 1.5, 1.5},
	{"github.com/sirupsen/logrus@v1.10.2", "2000x", 2.0, 2.5},
	{"github.com/gin-gonic/gin@v1.12.0", "2000x", 2.0, 2.5},
}

type benchCase struct {
	pkg, benchtime string
	goal, busyGoal float64 // quiet, and with -busy processes beside it
}

// benchCasesOf are the cases whose package path contains one of names
// (all for none).
func benchCasesOf(names []string) []benchCase {
	if len(names) == 0 {
		return benchCases
	}
	var out []benchCase
	for _, c := range benchCases {
		if slices.ContainsFunc(names, func(n string) bool { return strings.Contains(c.pkg, n) }) {
			out = append(out, c)
		}
	}
	return out
}

// benchPhases are probe run -bench's steps, each named by the progress
// line that begins it.
var benchPhases = []struct{ name, line string }{
	{"build", "probe: "},
	{"plain", "timing the benchmarks"},
	{"counted", "counting the benchmarks"},
	{"traced", "tracing the benchmarks"},
	{"writing", "probe: writing "},
}

// benchArms are one case's seconds: go test's, probe's, and probe's by
// phase.
type benchArms struct {
	gotest, probe []float64
	phases        map[string][]float64
}

// BenchCmd sets 'probe run -bench .' beside 'go test -run ^$ -bench .
// -benchmem' on each case, wall time once built (a first run of each,
// untimed, builds), in interleaved rounds, and prints the ratio against
// its goal and probe's seconds by phase (from its progress lines).
var BenchCmd = Bench{Name: "bench", Run: func(ctx context.Context, env Env) error {
	cases := benchCasesOf(env.Packages)
	if len(cases) == 0 {
		return fmt.Errorf("-pkg %s: no case's package (%s)", strings.Join(env.Packages, ","), strings.Join(benchPkgs(), ", "))
	}
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
	stop, err := startBusy(ctx, env.Busy)
	if err != nil {
		return err
	}
	defer stop()
	got := map[string]*benchArms{}
	for _, c := range cases {
		a, err := benchCaseRounds(ctx, env, c, mod, probe, tmp)
		if err != nil {
			return err
		}
		got[c.pkg] = a
	}
	printBench(env.Stdout, env, cases, got)
	return nil
}}

// benchCaseRounds runs one case's rounds, go test and probe interleaved.
func benchCaseRounds(ctx context.Context, env Env, c benchCase, mod, probe, tmp string) (*benchArms, error) {
	path, version, _ := strings.Cut(c.pkg, "@")
	if version != "" {
		if err := runQuiet(ctx, mod, "go", "get", "-t", c.pkg); err != nil {
			return nil, err
		}
	}
	var bt []string
	if c.benchtime != "" {
		bt = []string{"-benchtime", c.benchtime}
	}
	a := &benchArms{phases: map[string][]float64{}}
	gotest := func(bench string) error {
		return runQuiet(ctx, mod, "go", append(append([]string{"test", "-run", "^$", "-bench", bench, "-benchmem"}, bt...), path)...)
	}
	// Each run writes a folder of its own, as runs do by default: one
	// removed just before would make the file system's inode allocator
	// step over the hundreds of inodes freed (ext4 without a journal: a
	// file's creation there cost 0.2-0.6 ms instead of 0.04).
	newOut := func() (string, error) {
		d, err := os.MkdirTemp(tmp, "out-")
		return filepath.Join(d, "results"), err
	}
	probeRun := func(bench string) error {
		out, err := newOut()
		if err != nil {
			return err
		}
		args := append(append([]string{"run", "-bench", bench}, bt...), "-out", out, c.pkg)
		return runPhases(ctx, mod, probe, args, a.phases)
	}
	// Built once, untimed: a benchmark name that matches nothing.
	gotest("^NoSuchBenchmark$")
	out, err := newOut()
	if err != nil {
		return nil, err
	}
	runQuiet(ctx, mod, probe, "run", "-q", "-bench", "^NoSuchBenchmark$", "-out", out, c.pkg)
	order := []struct {
		name string
		run  func(string) error
		secs *[]float64
	}{{"go test", gotest, &a.gotest}, {"probe run -bench", probeRun, &a.probe}}
	for r := 0; r < env.Rounds; r++ {
		for _, x := range order {
			fmt.Fprintf(env.Stderr, "round %d/%d: %s %s, %s\n", r+1, env.Rounds, c.pkg, c.benchtime, x.name)
			start := time.Now()
			if err := x.run("."); err != nil {
				return nil, err
			}
			*x.secs = append(*x.secs, time.Since(start).Seconds())
		}
		order[0], order[1] = order[1], order[0] // interleaved: AB, BA, ...
	}
	return a, nil
}

// runPhases runs probe with its progress lines on, and adds the seconds
// from each phase's line to the next's (the last's to its exit) to
// phases.
func runPhases(ctx context.Context, dir, probe string, args []string, phases map[string][]float64) error {
	cmd := exec.CommandContext(ctx, probe, args...)
	cmd.Dir = dir
	pr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	var all strings.Builder
	cmd.Stdout = &all
	if err := cmd.Start(); err != nil {
		return err
	}
	cur, since := "", time.Now()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		all.WriteString(line + "\n")
		for _, p := range benchPhases {
			if strings.Contains(line, p.line) && p.name != cur && (cur == "" || p.name != "build") {
				if cur != "" {
					phases[cur] = append(phases[cur], time.Since(since).Seconds())
				}
				cur, since = p.name, time.Now()
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", probe, strings.Join(args, " "), err, all.String())
	}
	if cur != "" {
		phases[cur] = append(phases[cur], time.Since(since).Seconds())
	}
	return nil
}

// printBench prints each case's medians, its ratio against its goal,
// and probe's seconds by phase.
func printBench(w io.Writer, env Env, cases []benchCase, got map[string]*benchArms) {
	beside := "a quiet machine"
	if env.Busy > 0 {
		beside = fmt.Sprintf("%d CPU-bound processes beside every run (-busy)", env.Busy)
	}
	fmt.Fprintf(w, "probe run -bench . against go test -run '^$' -bench . -benchmem, wall time once built, median of %d interleaved rounds, %s\n", env.Rounds, beside)
	fmt.Fprintf(w, "  %-42s %10s %10s %10s %8s\n", "package", "benchtime", "go test s", "probe s", "ratio")
	for _, c := range cases {
		a := got[c.pkg]
		g, p := median(a.gotest), median(a.probe)
		bt := c.benchtime
		if bt == "" {
			bt = "default"
		}
		goal := c.goal
		if env.Busy > 0 {
			goal = c.busyGoal
		}
		fmt.Fprintf(w, "  %-42s %10s %10.2f %10.2f %7.2fx (goal at most %.1f)\n", c.pkg, bt, g, p, p/g, goal)
		var parts []string
		for _, ph := range benchPhases {
			if v, ok := a.phases[ph.name]; ok {
				parts = append(parts, fmt.Sprintf("%s %.2f", ph.name, median(v)))
			}
		}
		fmt.Fprintf(w, "  %-42s probe's seconds: %s\n", "", strings.Join(parts, ", "))
	}
}

// runQuiet runs a command in dir, its output kept for the error.
func runQuiet(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return nil
}

// benchPkgs are the cases' packages.
func benchPkgs() []string {
	var out []string
	for _, c := range benchCases {
		out = append(out, c.pkg)
	}
	return out
}

// startBusy starts n CPU-bound processes (a shell's empty loop, which
// starts no other: the colon is a builtin); stop kills them and waits,
// and ctx's end kills them too: none outlives the benchmark.
func startBusy(ctx context.Context, n int) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
	for range n {
		c := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("-busy: %w", err)
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}
