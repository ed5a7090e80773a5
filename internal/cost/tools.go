package cost

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/internal/synthprof"
)

// Allocdiff times allocdiff against go tool pprof -top -diff_base.
var Allocdiff = Bench{Name: "allocdiff", Run: func(ctx context.Context, env Env) error {
	return benchReaders(ctx, env, "allocdiff")
}}

// Flame times flame against go tool pprof -top and flamegraph.pl.
var Flame = Bench{Name: "flame", Run: func(ctx context.Context, env Env) error {
	return benchReaders(ctx, env, "flame")
}}

// ReaderShapes are the shapes of input the readers' benchmarks run on
// (synthprof.Shapes); allocdiff has no folded input.
func ReaderShapes(tool string) []string {
	var out []string
	for _, sh := range synthprof.Shapes {
		if tool == "allocdiff" && sh.FoldedLines > 0 {
			continue
		}
		out = append(out, sh.Name)
	}
	return out
}

// readerGoals are what each shape must meet: the speed-up over the
// reference and the memory as a fraction of its, and an absolute bound
// on the 1M-location profile.
type readerGoal struct {
	speedup, memory float64
	secs, mb        float64 // 0: none
}

func goalOf(tool string, sh synthprof.Shape) readerGoal {
	g := readerGoal{speedup: 10, memory: 1.0 / 3}
	switch {
	case sh.FoldedLines > 0:
		g = readerGoal{speedup: 50, memory: 0.1}
	case sh.FreshLeaves && tool == "flame":
		g.secs, g.mb = 3, 500
	case sh.FreshLeaves:
		g.secs, g.mb = 5, 500
	}
	return g
}

// flamegraphPl is flamegraph.pl measured on a machine like the one the
// project runs on (2 cores), on the folded shape (238 MB), for when it
// is not on PATH: seconds and MB (2026-12-02).
const flamegraphPlSecs, flamegraphPlMB = 36.7, 1762

// benchReaders times tool (flame or allocdiff) against the reference on
// each shape of env.Shapes, in alternating rounds, and prints a table
// with the goals met or not.
func benchReaders(ctx context.Context, env Env, tool string) error {
	shapes := env.Shapes
	if len(shapes) == 0 {
		shapes = ReaderShapes(tool)
	}
	for _, name := range shapes {
		if !slices.Contains(ReaderShapes(tool), name) {
			return fmt.Errorf("-shape %s: want one of %s", name, strings.Join(ReaderShapes(tool), ", "))
		}
	}
	work, err := os.MkdirTemp("", "perfspy-cost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	tools, err := buildTools(ctx, env.Stderr, work, "rsswrap", tool)
	if err != nil {
		return err
	}
	rb := &readerBench{env: env, tool: tool, work: work, wrap: tools[0], bin: tools[1], pprof: tools[2]}
	ref := "go tool pprof -top"
	if tool == "allocdiff" {
		ref += " -diff_base"
	}
	if tool == "flame" {
		ref += " (flamegraph.pl on folded input)"
	}
	fmt.Fprintf(env.Stdout, "%s against %s, synthetic profiles from seeds, median of %d alternating rounds\n", tool, ref, env.Rounds)
	fmt.Fprintf(env.Stdout, "%-13s %-62s %8s %7s %8s %7s %8s %7s  %s\n", "shape", "input", tool+" s", "MB", "ref s", "MB", "speedup", "memory", "goals")
	for _, name := range shapes {
		sh, _ := synthprof.ShapeNamed(name)
		if err := rb.shape(ctx, sh); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// readerBench is one reader's benchmark: the tool, the reference, where
// their inputs are written.
type readerBench struct {
	env                    Env
	tool                   string
	work, wrap, bin, pprof string
}

// inputs writes a shape's inputs (two for allocdiff) and returns their
// paths and the first's size.
func (rb *readerBench) inputs(sh synthprof.Shape) ([]string, int64, error) {
	fmt.Fprintf(rb.env.Stderr, "writing the %s inputs\n", sh.Name)
	g := synthprof.NewGraph(1, sh.Funcs)
	types := []string{"alloc_objects/count", "alloc_space/bytes"}
	if rb.tool == "flame" {
		types = []string{"samples/count", "cpu/nanoseconds"}
	}
	var inputs []string
	var size int64
	for i := 0; i < 2; i++ {
		path := filepath.Join(rb.work, fmt.Sprintf("%s.%d", sh.Name, i))
		f, err := os.Create(path)
		if err != nil {
			return nil, 0, err
		}
		if sh.FoldedLines > 0 {
			size, err = g.WriteFolded(f, int64(10+i), sh)
		} else {
			err = g.WriteProfile(f, int64(10+i), sh, types)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, 0, err
		}
		if st, err := os.Stat(path); err == nil && size == 0 {
			size = st.Size()
		}
		inputs = append(inputs, path)
		if rb.tool == "flame" {
			break
		}
	}
	return inputs, size, nil
}

// shape times the tool and its reference on a shape's inputs, in
// alternating rounds, and prints the row.
func (rb *readerBench) shape(ctx context.Context, sh synthprof.Shape) error {
	inputs, size, err := rb.inputs(sh)
	if err != nil {
		return err
	}
	ours := []string{rb.bin, "-o", filepath.Join(rb.work, "out.svg"), inputs[0]}
	theirs := []string{rb.pprof, "-top", inputs[0]}
	if rb.tool == "allocdiff" {
		ours = []string{rb.bin, inputs[0], inputs[1]}
		theirs = []string{rb.pprof, "-top", "-diff_base", inputs[0], inputs[1]}
	}
	refSecs, refMB := 0.0, 0.0
	if sh.FoldedLines > 0 {
		theirs = nil
		if perl, err := exec.LookPath("flamegraph.pl"); err == nil {
			theirs = []string{perl, inputs[0]}
		} else {
			refSecs, refMB = flamegraphPlSecs, flamegraphPlMB
		}
	}
	var ot, om, rt, rm []float64
	for r := 0; r < rb.env.Rounds; r++ {
		runs := [][]string{ours, theirs}
		if r%2 == 1 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, cmd := range runs {
			if cmd == nil {
				continue
			}
			fmt.Fprintf(rb.env.Stderr, "%s, round %d: %s\n", sh.Name, r+1, filepath.Base(cmd[0]))
			// rsswrap discards the command's output and prints its memory.
			t, m, err := measure(ctx, rb.wrap, cmd...)
			if err != nil {
				return err
			}
			if cmd[0] == rb.bin {
				ot, om = append(ot, t), append(om, m)
			} else {
				rt, rm = append(rt, t), append(rm, m)
			}
		}
	}
	r := row{sh: sh, size: size, secs: median(ot), mb: median(om), refSecs: refSecs, refMB: refMB, recorded: theirs == nil}
	if theirs != nil {
		r.refSecs, r.refMB = median(rt), median(rm)
	}
	r.write(rb.env.Stdout, rb.tool)
	return nil
}

// row is a shape's figures: the tool's and the reference's medians.
type row struct {
	sh                       synthprof.Shape
	size                     int64
	secs, mb, refSecs, refMB float64
	recorded                 bool // the reference's are the recorded ones
}

// write prints a shape's figures and its goals, met or not.
func (r row) write(w io.Writer, tool string) {
	sh, size, secs, mb, refSecs, refMB := r.sh, r.size, r.secs, r.mb, r.refSecs, r.refMB
	g := goalOf(tool, sh)
	speedup, memory := refSecs/secs, mb/refMB
	goals := []string{
		fmt.Sprintf("speed-up >= %gx %s", g.speedup, verdict(speedup >= g.speedup)),
		fmt.Sprintf("memory <= %.2f %s", g.memory, verdict(memory <= g.memory)),
	}
	if g.secs > 0 {
		goals = append(goals, fmt.Sprintf("<= %g s %s", g.secs, verdict(secs <= g.secs)), fmt.Sprintf("<= %g MB %s", g.mb, verdict(mb <= g.mb)))
	}
	ref := ""
	if r.recorded {
		ref = " (flamegraph.pl not on PATH: the reference as measured on a machine like this one)"
	}
	fmt.Fprintf(w, "%-13s %-62s %8.2f %7.0f %8.2f %7.0f %7.1fx %7.2f  %s%s\n", sh.Name, describe(tool, sh, size), secs, mb, refSecs, refMB, speedup, memory, strings.Join(goals, ", "), ref)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

// describe says what a shape's input is.
func describe(tool string, sh synthprof.Shape, size int64) string {
	mb := float64(size) / (1 << 20)
	if sh.FoldedLines > 0 {
		return fmt.Sprintf("%dk folded lines, depth %d-%d (%.0f MB)", sh.FoldedLines/1000, sh.MinDepth, sh.MaxDepth, mb)
	}
	what := fmt.Sprintf("%s samples, depth %d-%d, %dk funcs", count(sh.Samples), sh.MinDepth, sh.MaxDepth, sh.Funcs/1000)
	if sh.FreshLeaves {
		what += ", a location each"
	}
	if tool == "allocdiff" {
		return fmt.Sprintf("%s, x2 (%.0f MB gz)", what, mb)
	}
	return fmt.Sprintf("%s (%.0f MB gz)", what, mb)
}

func count(n int) string {
	if n >= 1000000 && n%1000000 == 0 {
		return fmt.Sprintf("%dM", n/1000000)
	}
	return fmt.Sprintf("%dk", n/1000)
}

// buildTools builds the named commands (rsswrap, under which the measured
// commands run so that their peak memory is theirs alone; allocdiff;
// flame) into dir, and returns their paths followed by the pprof tool's.
func buildTools(ctx context.Context, stderr io.Writer, dir string, names ...string) ([]string, error) {
	root, err := srcroot.Dir()
	if err != nil {
		return nil, err
	}
	pkgs := map[string]string{"rsswrap": "./internal/cost/rsswrap", "allocdiff": "./cmd/allocdiff", "flame": "./cmd/flame"}
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
