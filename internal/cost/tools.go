package cost

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/internal/synthprof"
)

// Allocdiff times allocdiff against go tool pprof -top -diff_base.
var Allocdiff = Bench{Name: "allocdiff", Run: func(ctx context.Context, env Env) error {
	return benchAllocdiff(ctx, env.Stdout, env.Stderr, env.Rounds)
}}

// Flame times flame against go tool pprof -top and flamegraph.pl.
var Flame = Bench{Name: "flame", Run: func(ctx context.Context, env Env) error {
	return benchFlame(ctx, env.Stdout, env.Stderr, env.Rounds)
}}

// benchAllocdiff times allocdiff against go tool pprof -top -diff_base on
// synthetic profile pairs of 50k and 100k samples (synthprof.Synthetic), run
// alternately, and compares wall time and peak memory (max RSS).
func benchAllocdiff(ctx context.Context, stdout, stderr io.Writer, rounds int) error {
	work, err := os.MkdirTemp("", "perfspy-cost-")
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

// benchFlame times flame on a 100k-sample pprof profile against go tool
// pprof -top on the same file, and on 100k lines of folded stacks (depth
// 10 to 60) against flamegraph.pl when it is on PATH; it prints flame's
// peak memory, and the reference measured on this kind of machine when
// flamegraph.pl is not there.
func benchFlame(ctx context.Context, stdout, stderr io.Writer, rounds int) error {
	work, err := os.MkdirTemp("", "perfspy-cost-")
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
	fmt.Fprintf(stdout, "  pprof input, 100k samples: flame %.2f s %0.f MB, go tool pprof -top %.2f s %.0f MB: %.1fx faster (goal at least 3x), %.2f of its memory (goal at most 0.33)\n",
		median(fp.t), median(fp.m), median(pp.t), median(pp.m), median(pp.t)/median(fp.t), median(fp.m)/median(pp.m))
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
