package cost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/schema"
)

// run is one probe run: the target (relative to perfspy's tree), and the
// flags of probe run.
type run struct {
	target string
	flags  []string
}

// probeRounds builds the probe command and runs it in interleaved rounds
// (AB, BA, ...) over modes: cfg(mode) says what to run, and each summary
// goes to collect(mode, summary). Exit code 3 (not judged) still counts:
// the benchmarks read their own figures.
func probeRounds(ctx context.Context, env Env, what string, modes []string, cfg func(mode string) run, collect func(mode string, s *schema.Summary) error) error {
	root, tmp, bin, err := probeWorkdir(ctx)
	if tmp != "" {
		defer os.RemoveAll(tmp)
	}
	if err != nil {
		return err
	}
	for r := 0; r < env.Rounds; r++ {
		order := slices.Clone(modes)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, m := range order {
			fmt.Fprintf(env.Stderr, "round %d/%d: %s, %s\n", r+1, env.Rounds, what, m)
			c := cfg(m)
			out := filepath.Join(tmp, fmt.Sprintf("%d-%d", r, slices.Index(modes, m)))
			args := append([]string{"run", "-q", "-out", out, "-warmup", "1s", "-duration", env.Duration.String()}, c.flags...)
			cmd := exec.CommandContext(ctx, bin, append(args, filepath.Join(root, c.target))...)
			cmd.Dir = root
			var errb strings.Builder
			cmd.Stderr = &errb
			if err := cmd.Run(); err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 3 {
					return fmt.Errorf("probe %s: %v\n%s", strings.Join(args, " "), err, errb.String())
				}
			}
			b, err := os.ReadFile(filepath.Join(out, "summary.json"))
			if err != nil {
				return err
			}
			var s schema.Summary
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(out, "summary.json"), err)
			}
			if err := collect(m, &s); err != nil {
				return err
			}
		}
	}
	return nil
}

// probeWorkdir makes a temporary folder (the caller removes tmp, when
// not "") and builds the probe command of perfspy's tree (root) into it.
func probeWorkdir(ctx context.Context) (root, tmp, bin string, err error) {
	if root, err = srcroot.Dir(); err != nil {
		return "", "", "", err
	}
	if tmp, err = os.MkdirTemp("", "perfspy-cost-"); err != nil {
		return "", "", "", err
	}
	bin = filepath.Join(tmp, "probe")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/probe")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return root, tmp, "", fmt.Errorf("building probe: %v\n%s", err, b)
	}
	return root, tmp, bin, nil
}

// rpsRow is one arm of an httpjson req/s table.
type rpsRow struct {
	label string
	rps   []float64
}

// writeRPSRatios prints the median req/s of the plain runtime and of each
// row, with its ratio to plain.
func writeRPSRatios(w io.Writer, rounds int, plain []float64, rows []rpsRow) {
	p := median(plain)
	fmt.Fprintf(w, "targets/httpjson GET /json req/s, median of %d interleaved rounds\n", rounds)
	fmt.Fprintf(w, "  %-22s  %10.0f\n", "plain runtime", p)
	for _, r := range rows {
		m := median(r.rps)
		fmt.Fprintf(w, "  %-22s  %10.0f  ratio %.3f\n", r.label, m, m/p)
	}
}

// HTTPJSONCopies runs probe on targets/httpjson alternately without and
// with the copyspy overlay, and prints median req/s and ratios to plain.
var HTTPJSONCopies = Bench{Name: "httpjson", Run: func(ctx context.Context, env Env) error {
	var plain, idle, on []float64
	err := probeRounds(ctx, env, "httpjson, copies", []string{"off", "overlay"}, func(m string) run {
		return run{"targets/httpjson", []string{"-path", "/json", "-copies", m, "-allocs", "heapprofile"}}
	}, func(m string, s *schema.Summary) error {
		if m == "off" {
			plain = append(plain, s.Window.RPS)
			return nil
		}
		idle = append(idle, s.Window.RPS)
		if s.CopiesWindow == nil {
			return fmt.Errorf("no copies window: %s", s.Sources["copies"])
		}
		on = append(on, s.CopiesWindow.RPS)
		return nil
	})
	if err != nil {
		return err
	}
	writeRPSRatios(env.Stdout, env.Rounds, plain, []rpsRow{{"overlay, recorder idle", idle}, {"overlay, recorder on", on}})
	return nil
}}

// HTTPJSONAllocs runs probe on targets/httpjson alternately with the heap
// profile source and with allocspy (copies off), and prints the median req/s
// of the plain runtime (the heap-profile run's timing window), of allocspy
// counting, and of MemProfileRate=1, with ratios to plain.
var HTTPJSONAllocs = Bench{Name: "httpjson-allocs", Run: func(ctx context.Context, env Env) error {
	var plain, spy, rate1 []float64
	err := probeRounds(ctx, env, "httpjson, allocs", []string{"heapprofile", "allocspy"}, func(m string) run {
		return run{"targets/httpjson", []string{"-path", "/json", "-copies", "off", "-allocs", m}}
	}, func(m string, s *schema.Summary) error {
		if m == "heapprofile" {
			plain = append(plain, s.Window.RPS)
			rate1 = append(rate1, s.AttributionWindow.RPS)
			return nil
		}
		if s.Sources["allocs"] != "allocspy" {
			return fmt.Errorf("allocspy not used: %s", s.Sources["allocs"])
		}
		spy = append(spy, s.AttributionWindow.RPS)
		return nil
	})
	if err != nil {
		return err
	}
	writeRPSRatios(env.Stdout, env.Rounds, plain, []rpsRow{{"allocspy counting", spy}, {"MemProfileRate=1", rate1}})
	return nil
}}

// OffCPU measures what the off-CPU window costs a server with many idle
// goroutines: the execution trace alone, and fgprof alone, each as the
// ratio of the off-CPU window's CPU per request to the timing window's, in
// interleaved runs.
var OffCPU = Bench{Name: "offcpu", Run: func(ctx context.Context, env Env) error {
	ratios := map[string][]float64{}
	err := probeRounds(ctx, env, fmt.Sprintf("%d idle goroutines", env.Idle), []string{"trace", "fgprof"}, func(m string) run {
		flags := []string{"-path", "/none", "-args", "-idle " + strconv.Itoa(env.Idle),
			"-offcpu", "-copies", "off", "-allocs", "heapprofile", "-syscalls", "proc-io", "-wallclock=false"}
		if m == "fgprof" {
			flags = append(flags, "-fgprof-only")
		}
		return run{"probe/testdata/probetarget", flags}
	}, func(m string, s *schema.Summary) error {
		// The trace has the off-CPU window, fgprof the wall-clock window.
		win := s.OffCPUWindow
		if m == "fgprof" {
			win = s.WallclockWindow
		}
		if win == nil || s.PerRequest.CPUUS == nil || *s.PerRequest.CPUUS == 0 {
			return fmt.Errorf("%s: no window figures", m)
		}
		ratios[m] = append(ratios[m], win.CPUUS / *s.PerRequest.CPUUS)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "CPU per request, the instrument's window (off-CPU, wall-clock) / timing window, probetarget /none with %d idle goroutines, median of %d interleaved rounds\n", env.Idle, env.Rounds)
	fmt.Fprintf(env.Stdout, "  execution trace (perfspy off-CPU)  %.3fx\n", median(ratios["trace"]))
	fmt.Fprintf(env.Stdout, "  fgprof wall-clock at 99 Hz         %.3fx\n", median(ratios["fgprof"]))
	return nil
}}

// Attribution reports what summary.attribution_window.rps is as a share of
// the timing window's, with allocspy and copyspy counting, as the median of
// several runs: on httpjson and on a handler making 10 allocations per
// request.
var Attribution = Bench{Name: "attribution", Run: func(ctx context.Context, env Env) error {
	targets := []string{"httpjson /json", "probetarget /alloc10?spin=20"}
	ratios := map[string][]float64{}
	err := probeRounds(ctx, env, "attribution window", targets, func(m string) run {
		if m == targets[1] {
			return run{"probe/testdata/probetarget", []string{"-path", "/alloc10?spin=20"}}
		}
		return run{"targets/httpjson", []string{"-path", "/json"}}
	}, func(m string, s *schema.Summary) error {
		if s.Window.RPS > 0 {
			ratios[m] = append(ratios[m], s.AttributionWindow.RPS/s.Window.RPS)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "attribution window (allocspy + copyspy) req/s / timing window req/s, median of %d runs\n", env.Rounds)
	for _, t := range targets {
		fmt.Fprintf(env.Stdout, "  %-30s %.3f  (runs: %.3f)\n", t, median(ratios[t]), ratios[t])
	}
	return nil
}}

// pairedRatios divides each round's figure by the same round's plain one:
// rounds run side by side, so a drift of the machine between rounds
// cancels.
func pairedRatios(v, plain []float64) []float64 {
	out := make([]float64, 0, len(v))
	for i := range min(len(v), len(plain)) {
		out = append(out, v[i]/plain[i])
	}
	return out
}

// Live measures what a binary built by probe build costs a server, as the
// median ratio of CPU per request to a build without any overlay, in
// interleaved runs, on targets/httpjson and on a light handler
// (probetarget's /none, where the per-request costs weigh most):
// unconfigured (the overlays' switches off, the request marks on: the
// timing window of a -sample run), sampling one request in 64 (the
// attribution window of -sample 64, the recorders in their sampled mode),
// and every request accounted (-sample 1).
var Live = Bench{Name: "live", Run: func(ctx context.Context, env Env) error {
	for _, t := range liveTargets {
		cpu := map[string][]float64{}
		err := probeRounds(ctx, env, t.name+", live", []string{"plain", "idle", "64", "1"}, func(m string) run {
			flags := []string{"-path", t.path, "-offcpu=false", "-syscalls", "proc-io"}
			switch m {
			case "plain":
				return run{t.dir, append(flags, "-copies", "off", "-allocs", "heapprofile")}
			case "idle":
				return run{t.dir, append(flags, "-env", wire.MarksEnv+"=off")}
			}
			return run{t.dir, append(flags, "-sample", m)}
		}, func(m string, s *schema.Summary) error {
			if s.PerRequest.CPUUS == nil {
				return fmt.Errorf("%s: no CPU per request", m)
			}
			if m == "plain" || m == "idle" {
				cpu[m] = append(cpu[m], *s.PerRequest.CPUUS)
				return nil
			}
			cpu[m] = append(cpu[m], s.AttributionWindow.CPUUS)
			return nil
		})
		if err != nil {
			return err
		}
		p := median(cpu["plain"])
		fmt.Fprintf(env.Stdout, "%s: CPU per request against a build without overlays (%.2f µs), %d interleaved rounds: median of the rounds' ratios [lowest, highest]\n", t.name, p, env.Rounds)
		for _, row := range [][2]string{{"idle", "unconfigured: recorders and request marks off"}, {"64", "sampling 1 request in 64 per route"}, {"1", "every request accounted (1 in 1)"}} {
			r := pairedRatios(cpu[row[0]], cpu["plain"])
			fmt.Fprintf(env.Stdout, "  %-46s %.3fx [%.3f, %.3f] (%.2f µs)\n", row[1], median(r), slices.Min(r), slices.Max(r), median(cpu[row[0]]))
		}
	}
	return nil
}}

// liveTargets are the servers the live benches run: httpjson, and a light
// handler where the per-request costs weigh most, and a handler that
// makes a thousand buffered channels, each a value in the handoff table.
var liveTargets = []struct{ name, dir, path string }{{"targets/httpjson /json", "targets/httpjson", "/json"}, {"probetarget /none", "probe/testdata/probetarget", "/none"}, {"probetarget /flood?n=1000", "probe/testdata/probetarget", "/flood?n=1000"}}

// LiveInstructions measures what a probe build binary costs as
// instructions per request under callgrind (probe run -instructions), which
// repeat from run to run where CPU time on a shared machine does not: a
// build without overlays, the same build as probe build makes it (-live)
// unconfigured, and in live mode sampling one request in 64 and every
// request (its store unreachable and its period an hour: no push falls in
// the window).
var LiveInstructions = Bench{Name: "live-instructions", Run: func(ctx context.Context, env Env) error {
	live := []string{"-live", "-env", "PERFSPY_PUSH=http://127.0.0.1:9", "-env", "PERFSPY_PERIOD=1h", "-env", "PERFSPY_LAST_PUSH=off"}
	for _, t := range liveTargets {
		ins := map[string][]float64{}
		err := probeRounds(ctx, env, t.name+", live instructions", []string{"plain", "idle", "64", "1"}, func(m string) run {
			flags := []string{"-instructions", "-path", t.path}
			switch m {
			case "idle":
				flags = append(flags, "-live", "-env", wire.MarksEnv+"=off")
			case "64", "1":
				flags = append(append(flags, live...), "-env", "PERFSPY_SAMPLE="+m)
			}
			return run{t.dir, flags}
		}, func(m string, s *schema.Summary) error {
			if s.PerRequest.Instructions == nil {
				return fmt.Errorf("%s: no instructions per request", m)
			}
			ins[m] = append(ins[m], *s.PerRequest.Instructions)
			return nil
		})
		if err != nil {
			return err
		}
		p := median(ins["plain"])
		fmt.Fprintf(env.Stdout, "%s: instructions per request (callgrind) against a build without overlays (%.0f), median of %d rounds\n", t.name, p, env.Rounds)
		for _, row := range [][2]string{{"idle", "unconfigured: recorders and request marks off"}, {"64", "sampling 1 request in 64 per route"}, {"1", "every request accounted (1 in 1)"}} {
			fmt.Fprintf(env.Stdout, "  %-46s %.4fx (%+.0f)\n", row[1], median(ins[row[0]])/p, median(ins[row[0]])-p)
		}
	}
	return nil
}}
