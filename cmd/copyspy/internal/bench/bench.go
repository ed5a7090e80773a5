// Package bench measures what copyspy costs, side by side with the plain
// runtime, in interleaved rounds: nanoseconds added per memmove, and the
// throughput of targets/httpjson. It prints medians and ratios; it is not
// a timed test.
package bench

import (
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

	"github.com/perfspy/perfspy/copyspy"
	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/probe"
)

// Main runs 'copyspy bench'. It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("copyspy bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rounds := fs.Int("rounds", 5, "interleaved rounds")
	what := fs.String("what", "memmove,httpjson", "benchmarks to run: memmove, httpjson")
	dur := fs.Duration("duration", 3*time.Second, "httpjson: load per window")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *rounds < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "copyspy bench: -rounds must be at least 1, and no arguments")
		return 2
	}
	for _, w := range strings.Split(*what, ",") {
		var err error
		switch w {
		case "memmove":
			err = benchMemmove(ctx, stdout, stderr, *rounds)
		case "httpjson":
			err = benchHTTPJSON(ctx, stdout, stderr, *rounds, *dur)
		default:
			fmt.Fprintf(stderr, "copyspy bench: unknown benchmark %q\n", w)
			return 2
		}
		if err != nil {
			fmt.Fprintf(stderr, "copyspy bench: %s: %v\n", w, err)
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

// benchMemmove builds memmovebench plain and with the overlay, runs them
// alternately, and prints the median ns per memmove for each size.
func benchMemmove(ctx context.Context, stdout, stderr io.Writer, rounds int) error {
	root, err := srcroot.Dir()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "copyspy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT", "GOARCH").Output()
	if err != nil {
		return err
	}
	f := strings.Fields(string(out))
	ov, err := copyspy.Overlay(f[0], f[1], work)
	if err != nil {
		return err
	}
	ob, _ := json.Marshal(map[string]any{"Replace": ov})
	overlay := filepath.Join(work, "overlay.json")
	if err := os.WriteFile(overlay, ob, 0o644); err != nil {
		return err
	}
	pkg := "./copyspy/testdata/memmovebench"
	plain, patched := filepath.Join(work, "plain"), filepath.Join(work, "overlay")
	fmt.Fprintln(stderr, "building memmovebench plain and with the copyspy overlay")
	for _, args := range [][]string{{"build", "-o", plain, pkg}, {"build", "-overlay=" + overlay, "-tags", "copyspy", "-o", patched, pkg}} {
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
	fmt.Fprintf(stdout, "memmove ns/op, median of %d interleaved rounds\n", rounds)
	fmt.Fprintf(stdout, "%8s %10s %12s %12s %14s %14s\n", "size", "plain", "overlay-off", "recorder-on", "added-off(ns)", "added-on(ns)")
	for _, n := range []string{"0", "64", "4096"} {
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
	tmp, err := os.MkdirTemp("", "copyspy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var plain, idle, on []float64
	for r := 0; r < rounds; r++ {
		modes := []string{"off", "overlay"}
		if r%2 == 1 {
			modes[0], modes[1] = modes[1], modes[0]
		}
		for _, m := range modes {
			fmt.Fprintf(stderr, "round %d/%d: httpjson, copies %s\n", r+1, rounds, m)
			res, err := probe.Run(ctx, probe.Config{
				Target: filepath.Join(root, "targets", "httpjson"), Path: "/json", Copies: m,
				Warmup: time.Second, Duration: dur, Out: filepath.Join(tmp, fmt.Sprintf("%d-%s", r, m)),
			}, nil)
			if err != nil && !errors.Is(err, probe.ErrNotJudged) {
				return err
			}
			if m == "off" {
				plain = append(plain, res.Summary.Window.RPS)
				continue
			}
			idle = append(idle, res.Summary.Window.RPS)
			if res.Summary.CopiesWindow == nil {
				return fmt.Errorf("no copies window: %s", res.Summary.Sources["copies"])
			}
			on = append(on, res.Summary.CopiesWindow.RPS)
		}
	}
	p := median(plain)
	fmt.Fprintf(stdout, "targets/httpjson GET /json req/s, median of %d interleaved rounds\n", rounds)
	fmt.Fprintf(stdout, "  plain runtime           %10.0f\n", p)
	fmt.Fprintf(stdout, "  overlay, recorder idle  %10.0f  ratio %.3f\n", median(idle), median(idle)/p)
	fmt.Fprintf(stdout, "  overlay, recorder on    %10.0f  ratio %.3f\n", median(on), median(on)/p)
	return nil
}
