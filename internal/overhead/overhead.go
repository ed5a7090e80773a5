// Package overhead measures what perfspy's runtime overlays cost, side by
// side with the plain runtime, in interleaved rounds: nanoseconds added per
// memmove and per allocation, and the throughput of targets/httpjson with
// each counter on. It prints medians and ratios; it is not a timed test.
package overhead

import (
	"github.com/perfspy/perfspy/internal/synthprof"

	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/probe"
)

// Main runs 'copyspy bench' or 'allocspy bench' (name); what is the
// default list of benchmarks. It returns the exit code.
func Main(ctx context.Context, name, what0 string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name+" bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rounds := fs.Int("rounds", 5, "interleaved rounds")
	what := fs.String("what", what0, "benchmarks to run: memmove, httpjson (copies), malloc, httpjson-allocs, offcpu, allocdiff, flame, attribution")
	dur := fs.Duration("duration", 3*time.Second, "httpjson, offcpu: load per window")
	idle := fs.Int("idle", 10000, "offcpu: idle goroutines in the target")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *rounds < 1 || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s bench: -rounds must be at least 1, and no arguments\n", name)
		return 2
	}
	for _, w := range strings.Split(*what, ",") {
		var err error
		switch w {
		case "memmove":
			err = benchMicro(ctx, stdout, stderr, *rounds, memmoveBench)
		case "malloc":
			err = benchMicro(ctx, stdout, stderr, *rounds, mallocBench)
		case "httpjson":
			err = benchHTTPJSON(ctx, stdout, stderr, *rounds, *dur)
		case "httpjson-allocs":
			err = benchHTTPJSONAllocs(ctx, stdout, stderr, *rounds, *dur)
		case "allocdiff":
			err = benchAllocdiff(ctx, stdout, stderr, *rounds)
		case "attribution":
			err = benchAttribution(ctx, stdout, stderr, *rounds, *dur)
		case "flame":
			err = benchFlame(ctx, stdout, stderr, *rounds)
		case "offcpu":
			err = benchOffCPU(ctx, stdout, stderr, *rounds, *dur, *idle)
		default:
			fmt.Fprintf(stderr, "%s bench: unknown benchmark %q\n", name, w)
			return 2
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s bench: %s: %v\n", name, w, err)
			return 1
		}
	}
	return 0
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// micro is a program that times an operation at a few sizes, built plain
// and with a runtime overlay.
type micro struct {
	name, pkg, tag string
	sizes          []string
	overlay        func(goroot, goarch, goexperiment, dir string) (map[string]string, error)
}

var memmoveBench = micro{
	name: "memmove", pkg: "./copyspy/testdata/memmovebench", tag: "copyspy", sizes: []string{"0", "64", "4096"},
	overlay: func(goroot, goarch, _, dir string) (map[string]string, error) {
		return copyspy.Overlay(goroot, goarch, dir)
	},
}

var mallocBench = micro{
	name: "malloc", pkg: "./allocspy/testdata/mallocbench", tag: "allocspy", sizes: []string{"8", "64", "1024"},
	overlay: allocspy.Overlay,
}

// benchMicro builds m plain and with its overlay, runs them alternately,
// and prints the median ns per operation for each size.
func benchMicro(ctx context.Context, stdout, stderr io.Writer, rounds int, m micro) error {
	root, err := srcroot.Dir()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "perfspy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT", "GOARCH", "GOEXPERIMENT").Output()
	if err != nil {
		return err
	}
	f := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(f) != 3 {
		return fmt.Errorf("go env: unexpected output %q", out)
	}
	ov, err := m.overlay(f[0], f[1], f[2], work)
	if err != nil {
		return err
	}
	ob, _ := json.Marshal(map[string]any{"Replace": ov})
	overlay := filepath.Join(work, "overlay.json")
	if err := os.WriteFile(overlay, ob, 0o644); err != nil {
		return err
	}
	plain, patched := filepath.Join(work, "plain"), filepath.Join(work, "overlay")
	fmt.Fprintf(stderr, "building %s plain and with the %s overlay\n", m.pkg, m.tag)
	for _, args := range [][]string{{"build", "-o", plain, m.pkg}, {"build", "-overlay=" + overlay, "-tags", m.tag, "-o", patched, m.pkg}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	samples := map[string][]float64{} // "size mode" -> ns/op
	for r := 0; r < rounds; r++ {
		order := []string{plain, patched}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, bin := range order {
			b, err := exec.CommandContext(ctx, bin).Output()
			if err != nil {
				return fmt.Errorf("%s: %w", bin, err)
			}
			sc := bufio.NewScanner(strings.NewReader(string(b)))
			for sc.Scan() {
				p := strings.Fields(sc.Text())
				if len(p) != 3 {
					continue
				}
				v, err := strconv.ParseFloat(p[2], 64)
				if err != nil {
					return err
				}
				k := p[0] + " " + p[1]
				samples[k] = append(samples[k], v)
			}
		}
	}
	fmt.Fprintf(stdout, "%s ns/op, median of %d interleaved rounds\n", m.name, rounds)
	fmt.Fprintf(stdout, "%8s %10s %12s %12s %14s %14s\n", "size", "plain", "overlay-off", "recorder-on", "added-off(ns)", "added-on(ns)")
	for _, n := range m.sizes {
		pl, off, on := median(samples[n+" plain"]), median(samples[n+" off"]), median(samples[n+" on"])
		fmt.Fprintf(stdout, "%8s %10.2f %12.2f %12.2f %14.2f %14.2f\n", n, pl, off, on, off-pl, on-pl)
	}
	return nil
}

// benchHTTPJSON runs probe on targets/httpjson alternately without and with
// the overlay, and prints median req/s and ratios to plain.
func benchHTTPJSON(ctx context.Context, stdout, stderr io.Writer, rounds int, dur time.Duration) error {
	root, err := srcroot.Dir()
	if err != nil {
		return err
	}
	var plain, idle, on []float64
	err = probeRounds(ctx, stderr, rounds, "httpjson, copies", [2]string{"off", "overlay"}, func(m string) probe.Config {
		return probe.Config{Target: filepath.Join(root, "targets", "httpjson"), Path: "/json", Copies: m, Allocs: "heapprofile", Warmup: time.Second, Duration: dur}
	}, func(m string, s *probe.Summary) error {
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
	writeRPSRatios(stdout, rounds, plain, []rpsRow{{"overlay, recorder idle", idle}, {"overlay, recorder on", on}})
	return nil
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

// probeRounds runs probe in interleaved rounds (AB, BA, ...) over modes:
// cfg(mode) configures a run, and each result goes to collect(mode, summary).
func probeRounds(ctx context.Context, stderr io.Writer, rounds int, what string, modes [2]string, cfg func(mode string) probe.Config, collect func(mode string, s *probe.Summary) error) error {
	tmp, err := os.MkdirTemp("", "perfspy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for r := 0; r < rounds; r++ {
		order := modes
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, m := range order {
			fmt.Fprintf(stderr, "round %d/%d: %s, %s\n", r+1, rounds, what, m)
			c := cfg(m)
			c.Out = filepath.Join(tmp, fmt.Sprintf("%d-%d", r, strings.Index(modes[0]+"|"+modes[1], m)))
			res, err := probe.Run(ctx, c, nil)
			if err != nil && !errors.Is(err, probe.ErrNotJudged) {
				return err
			}
			if err := collect(m, res.Summary); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchHTTPJSONAllocs runs probe on targets/httpjson alternately with the
// heap profile source and with allocspy (copies off), and prints the median
// req/s of the plain runtime (the heap-profile run's timing window), of
// allocspy counting, and of MemProfileRate=1, with ratios to plain.
func benchHTTPJSONAllocs(ctx context.Context, stdout, stderr io.Writer, rounds int, dur time.Duration) error {
	root, err := srcroot.Dir()
	if err != nil {
		return err
	}
	var plain, spy, rate1 []float64
	err = probeRounds(ctx, stderr, rounds, "httpjson, allocs", [2]string{"heapprofile", "allocspy"}, func(m string) probe.Config {
		return probe.Config{Target: filepath.Join(root, "targets", "httpjson"), Path: "/json", Copies: "off", Allocs: m, Warmup: time.Second, Duration: dur}
	}, func(m string, s *probe.Summary) error {
		if m == "heapprofile" {
			plain = append(plain, s.Window.RPS)
			rate1 = append(rate1, s.AttributionWindow.RPS)
			return nil
		}
		if s.Sources["allocs"] != probe.SourceAllocspy {
			return fmt.Errorf("allocspy not used: %s", s.Sources["allocs"])
		}
		spy = append(spy, s.AttributionWindow.RPS)
		return nil
	})
	if err != nil {
		return err
	}
	writeRPSRatios(stdout, rounds, plain, []rpsRow{{"allocspy counting", spy}, {"MemProfileRate=1", rate1}})
	return nil
}

// benchOffCPU measures what the off-CPU window costs a server with many
// idle goroutines: the execution trace alone, and fgprof alone, each as the
// ratio of the off-CPU window's CPU per request to the timing window's, in
// interleaved runs.
func benchOffCPU(ctx context.Context, stdout, stderr io.Writer, rounds int, dur time.Duration, idle int) error {
	root, err := srcroot.Dir()
	if err != nil {
		return err
	}
	ratios := map[string][]float64{}
	err = probeRounds(ctx, stderr, rounds, fmt.Sprintf("%d idle goroutines", idle), [2]string{"trace", "fgprof"}, func(m string) probe.Config {
		return probe.OffCPUBenchConfig(probe.Config{
			Target: filepath.Join(root, "probe", "testdata", "probetarget"), Path: "/none",
			Args: []string{"-idle", strconv.Itoa(idle)}, Warmup: time.Second, Duration: dur,
		}, m)
	}, func(m string, s *probe.Summary) error {
		if s.OffCPUWindow == nil || s.PerRequest.CPUUS == nil || *s.PerRequest.CPUUS == 0 {
			return fmt.Errorf("%s: no off-CPU window figures", m)
		}
		ratios[m] = append(ratios[m], s.OffCPUWindow.CPUUS / *s.PerRequest.CPUUS)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "CPU per request, off-CPU window / timing window, probetarget /none with %d idle goroutines, median of %d interleaved rounds\n", idle, rounds)
	fmt.Fprintf(stdout, "  execution trace (perfspy off-CPU)  %.3fx\n", median(ratios["trace"]))
	fmt.Fprintf(stdout, "  fgprof wall-clock at 99 Hz         %.3fx\n", median(ratios["fgprof"]))
	return nil
}

// benchAllocdiff times allocdiff against go tool pprof -top -diff_base on
// synthetic profile pairs of 50k and 100k samples (diff.Synthetic), run
// alternately, and compares wall time and peak memory (max RSS).
func benchAllocdiff(ctx context.Context, stdout, stderr io.Writer, rounds int) error {
	work, err := os.MkdirTemp("", "perfspy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	tools, err := buildTools(ctx, stderr, work, "rsswrap", "allocdiff")
	if err != nil {
		return err
	}
	wrap, ad, pprofBin := tools[0], tools[1], tools[2]
	types := []string{"alloc_objects/count", "alloc_space/bytes"}
	fmt.Fprintf(stdout, "allocdiff vs go tool pprof -top -diff_base, synthetic profiles (stack depth 10-60), median of %d alternating rounds\n", rounds)
	fmt.Fprintf(stdout, "%9s %12s %12s %8s %12s %12s %8s\n", "samples", "pprof s", "allocdiff s", "speedup", "pprof MB", "allocdiff MB", "mem ratio")
	for _, n := range []int{50000, 100000} {
		b, a := filepath.Join(work, fmt.Sprintf("b%d.pb.gz", n)), filepath.Join(work, fmt.Sprintf("a%d.pb.gz", n))
		for i, path := range []string{b, a} {
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if err := synthprof.Synthetic(int64(1000+10*n+i), n, types).Write(f); err != nil {
				f.Close()
				return err
			}
			f.Close()
		}
		var pt, pm, at, am []float64
		for r := 0; r < rounds; r++ {
			runs := []struct {
				t, m *[]float64
				cmd  []string
			}{
				{&pt, &pm, []string{pprofBin, "-top", "-diff_base", b, a}},
				{&at, &am, []string{ad, "-top", "20", b, a}},
			}
			if r%2 == 1 {
				runs[0], runs[1] = runs[1], runs[0]
			}
			for _, run := range runs {
				fmt.Fprintf(stderr, "%d samples, round %d: %s\n", n, r+1, filepath.Base(run.cmd[0]))
				// rsswrap discards the command's output and prints its memory.
				t, m, err := measure(ctx, wrap, run.cmd...)
				if err != nil {
					return err
				}
				*run.t = append(*run.t, t)
				*run.m = append(*run.m, m)
			}
		}
		fmt.Fprintf(stdout, "%9d %12.2f %12.2f %7.1fx %12.0f %12.0f %8.2f\n", n, median(pt), median(at), median(pt)/median(at), median(pm), median(am), median(am)/median(pm))
	}
	return nil
}

// buildTools builds the named commands (rsswrap, under which the measured
// commands run so that their peak memory is theirs alone; allocdiff;
// flame) into dir, and returns their paths followed by the pprof tool's.
func buildTools(ctx context.Context, stderr io.Writer, dir string, names ...string) ([]string, error) {
	root, err := srcroot.Dir()
	if err != nil {
		return nil, err
	}
	pkgs := map[string]string{"rsswrap": "./internal/overhead/rsswrap", "allocdiff": "./cmd/allocdiff", "flame": "./cmd/flame"}
	var out []string
	for _, n := range names {
		bin := filepath.Join(dir, n)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkgs[n])
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %v\n%s", n, err, b)
		}
		out = append(out, bin)
	}
	fmt.Fprintln(stderr, "finding the pprof tool (the first go tool pprof builds it)")
	b, err := exec.CommandContext(ctx, "go", "tool", "-n", "pprof").Output()
	if err != nil {
		return nil, fmt.Errorf("go tool -n pprof: %w", err)
	}
	return append(out, strings.TrimSpace(string(b))), nil
}

// measure runs args under rsswrap and returns the wall time in seconds
// and the peak resident memory in MiB.
func measure(ctx context.Context, wrap string, args ...string) (float64, float64, error) {
	cmd := exec.CommandContext(ctx, wrap, args...)
	var errb strings.Builder
	cmd.Stderr = &errb
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %v\n%s", args[0], err, errb.String())
	}
	secs := time.Since(start).Seconds()
	kb, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, 0, fmt.Errorf("rsswrap said %q", out)
	}
	return secs, kb / 1024, nil
}

// benchFlame times flame on a 100k-sample pprof profile against go tool
// pprof -top on the same file, and on 100k lines of folded stacks (depth
// 10 to 60) against flamegraph.pl when it is on PATH; it prints flame's
// peak memory, and the reference measured on this kind of machine when
// flamegraph.pl is not there.
func benchFlame(ctx context.Context, stdout, stderr io.Writer, rounds int) error {
	work, err := os.MkdirTemp("", "perfspy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	tools, err := buildTools(ctx, stderr, work, "rsswrap", "flame")
	if err != nil {
		return err
	}
	wrap, fl, pprofBin := tools[0], tools[1], tools[2]
	prof := filepath.Join(work, "p.pb.gz")
	f, err := os.Create(prof)
	if err != nil {
		return err
	}
	if err := synthprof.Synthetic(42, 100000, []string{"samples/count", "cpu/nanoseconds"}).Write(f); err != nil {
		return err
	}
	f.Close()
	folded := filepath.Join(work, "stacks.folded")
	size, err := writeFolded(folded, 100000)
	if err != nil {
		return err
	}
	type res struct{ t, m []float64 }
	timeCmd := func(r *res, args ...string) error {
		t, m, err := measure(ctx, wrap, args...)
		if err != nil {
			return err
		}
		r.t, r.m = append(r.t, t), append(r.m, m)
		return nil
	}
	var fp, pp, ff, fpl res
	perl, _ := exec.LookPath("flamegraph.pl")
	for r := 0; r < rounds; r++ {
		fmt.Fprintf(stderr, "round %d/%d\n", r+1, rounds)
		steps := []func() error{
			func() error { return timeCmd(&fp, fl, "-o", filepath.Join(work, "p.svg"), prof) },
			func() error { return timeCmd(&pp, pprofBin, "-top", prof) },
			func() error { return timeCmd(&ff, fl, "-o", filepath.Join(work, "f.svg"), folded) },
		}
		if perl != "" {
			steps = append(steps, func() error { return timeCmd(&fpl, perl, folded) })
		}
		if r%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stdout, "flame, median of %d rounds\n", rounds)
	fmt.Fprintf(stdout, "  pprof input, 100k samples: flame %.2f s %0.f MB, go tool pprof -top %.2f s %.0f MB: %.1fx faster\n",
		median(fp.t), median(fp.m), median(pp.t), median(pp.m), median(pp.t)/median(fp.t))
	fmt.Fprintf(stdout, "  folded input, 100k lines (%.0f MB): flame %.2f s, %.0f MB peak\n", float64(size)/(1<<20), median(ff.t), median(ff.m))
	if perl != "" {
		fmt.Fprintf(stdout, "  flamegraph.pl %.2f s, %.0f MB: flame %.1fx faster, %.3f of its memory\n", median(fpl.t), median(fpl.m), median(fpl.t)/median(ff.t), median(ff.m)/median(fpl.m))
	} else {
		fmt.Fprintf(stdout, "  flamegraph.pl is not on PATH; measured on this kind of machine: 88 s and 1.35 GB on such a file, i.e. flame %.0fx faster, %.3f of its memory\n",
			88/median(ff.t), median(ff.m)/1382)
	}
	return nil
}

// writeFolded writes n lines of Go-like folded stacks, depth 10 to 60.
func writeFolded(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	p := synthprof.Synthetic(7, 1, []string{"samples/count"})
	names := make([]string, len(p.Function))
	for i, fn := range p.Function {
		names[i] = fn.Name + "/" + filepath.Base(fn.Filename)
	}
	rng := uint64(88172645463325252)
	next := func(k int) int {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(k))
	}
	var size int64
	for i := 0; i < n; i++ {
		depth := 10 + next(51)
		var b strings.Builder
		for d := 0; d < depth; d++ {
			if d > 0 {
				b.WriteByte(';')
			}
			// Shared prefixes, as real stacks have.
			b.WriteString(names[(d*131+next(3+d*4))%len(names)])
		}
		fmt.Fprintf(&b, " %d\n", 1+next(1000))
		size += int64(b.Len())
		w.WriteString(b.String())
	}
	return size, w.Flush()
}

// benchAttribution reports what summary.attribution_window.rps is as a
// share of the timing window's, with allocspy and copyspy counting, as the
// median of several runs: on httpjson and on a handler making 10
// allocations per request.
func benchAttribution(ctx context.Context, stdout, stderr io.Writer, rounds int, dur time.Duration) error {
	root, err := srcroot.Dir()
	if err != nil {
		return err
	}
	targets := [2]string{"httpjson /json", "probetarget /alloc10?spin=20"}
	ratios := map[string][]float64{}
	err = probeRounds(ctx, stderr, rounds, "attribution window", targets, func(m string) probe.Config {
		c := probe.Config{Target: filepath.Join(root, "targets", "httpjson"), Path: "/json", OffCPU: true, Warmup: time.Second, Duration: dur}
		if m == targets[1] {
			c.Target, c.Path = filepath.Join(root, "probe", "testdata", "probetarget"), "/alloc10?spin=20"
		}
		return c
	}, func(m string, s *probe.Summary) error {
		if s.Window.RPS > 0 {
			ratios[m] = append(ratios[m], s.AttributionWindow.RPS/s.Window.RPS)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "attribution window (allocspy + copyspy) req/s / timing window req/s, median of %d runs\n", rounds)
	for _, t := range targets {
		fmt.Fprintf(stdout, "  %-30s %.3f  (runs: %.3f)\n", t, median(ratios[t]), ratios[t])
	}
	return nil
}
