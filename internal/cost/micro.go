package cost

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/internal/srcroot"
)

// Micro is a program that times an operation at a few sizes, built plain
// and with a runtime overlay: it prints "size mode ns/op" lines, mode
// plain, off (overlay, recorder idle) or on.
type Micro struct {
	Name, Pkg, Tag string // benchmark name, package (in perfspy's tree), build tag
	Sizes          []string
	Overlay        func(goroot, goarch, goexperiment, dir string) (map[string]string, error)
}

// MicroBench is the benchmark of m.
func MicroBench(m Micro) Bench {
	return Bench{Name: m.Name, Run: func(ctx context.Context, env Env) error {
		return benchMicro(ctx, env.Stdout, env.Stderr, env.Rounds, m)
	}}
}

// benchMicro builds m plain and with its overlay, runs them alternately,
// and prints the median ns per operation for each size.
func benchMicro(ctx context.Context, stdout, stderr io.Writer, rounds int, m Micro) error {
	root, err := srcroot.Dir()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "perfspy-cost-")
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
	ov, err := m.Overlay(f[0], f[1], f[2], work)
	if err != nil {
		return err
	}
	ob, _ := json.Marshal(map[string]any{"Replace": ov})
	overlay := filepath.Join(work, "overlay.json")
	if err := os.WriteFile(overlay, ob, 0o644); err != nil {
		return err
	}
	plain, patched := filepath.Join(work, "plain"), filepath.Join(work, "overlay")
	fmt.Fprintf(stderr, "building %s plain and with the %s overlay\n", m.Pkg, m.Tag)
	for _, args := range [][]string{{"build", "-o", plain, m.Pkg}, {"build", "-overlay=" + overlay, "-tags", m.Tag, "-o", patched, m.Pkg}} {
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
	fmt.Fprintf(stdout, "%s ns/op, median of %d interleaved rounds\n", m.Name, rounds)
	fmt.Fprintf(stdout, "%8s %10s %12s %12s %14s %14s\n", "size", "plain", "overlay-off", "recorder-on", "added-off(ns)", "added-on(ns)")
	for _, n := range m.Sizes {
		pl, off, on := median(samples[n+" plain"]), median(samples[n+" off"]), median(samples[n+" on"])
		fmt.Fprintf(stdout, "%8s %10.2f %12.2f %12.2f %14.2f %14.2f\n", n, pl, off, on, off-pl, on-pl)
	}
	return nil
}
