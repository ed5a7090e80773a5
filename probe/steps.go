package probe

// probe run -rate-steps: one open-loop run per rate, so that a run shows
// how a request's latency and cost grow with the load, and where the
// knee is.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
)

// MaxRateSteps bounds -rate-steps: each step is a whole run.
const MaxRateSteps = 8

// parseRates reads -rate-steps: "1000,2000,4000", increasing.
func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || v > 10_000_000 || math.IsInf(v, 0) {
			return nil, fmt.Errorf("-rate-steps %q: want requests per second above 0, at most 1e7, comma-separated", s)
		}
		if len(out) > 0 && v <= out[len(out)-1] {
			return nil, fmt.Errorf("-rate-steps %q: want increasing rates", s)
		}
		out = append(out, v)
	}
	if len(out) > MaxRateSteps {
		return nil, fmt.Errorf("-rate-steps %q: at most %d steps (each is a whole run)", s, MaxRateSteps)
	}
	return out, nil
}

// RateSteps runs cfg once per rate, open-loop, each into a folder of its
// own under the steps' folder, and writes steps.json and report.md. A
// step the driver could not hold is kept (it is the knee); the steps
// after it are still measured.
func RateSteps(ctx context.Context, cfg Config, rates []float64, logw io.Writer) (*schema.StepsResult, string, error) {
	// As a run's own folder: results/<UTC>_steps_<target>, never one that
	// exists, so that a second -rate-steps does not stop on the first's.
	out, err := makeOutDir(cfg.Out, "steps", filepath.Base(filepath.Clean(cfg.Target)))
	if err != nil {
		return nil, "", err
	}
	res := &schema.StepsResult{Schema: schema.StepsSchema, Target: cfg.Target, Arrivals: "constant"}
	if cfg.Arrivals.Poisson {
		res.Arrivals = "poisson"
	}
	for _, rate := range rates {
		rc := cfg
		rc.Arrivals.Rate = rate
		rc.Out = filepath.Join(out, "rate-"+strconv.FormatFloat(rate, 'f', -1, 64))
		if logw != nil {
			fmt.Fprintf(logw, "probe run: step %g req/s\n", rate)
		}
		r, err := Run(ctx, rc, logw)
		if err != nil && !errors.Is(err, ErrNotJudged) {
			// The steps that finished are kept, with why the rest are not.
			err = fmt.Errorf("step %g req/s: %w", rate, err)
			res.Stopped = err.Error()
			return res, out, errors.Join(err, writeSteps(out, res))
		}
		res.Steps = append(res.Steps, rateStep(r.Summary, rate, filepath.Base(rc.Out)))
	}
	if err := writeSteps(out, res); err != nil {
		return res, out, err
	}
	// Steps none of which held its rate say nothing of where the server
	// falls behind: not judged (exit 3), as a run would be.
	if !slices.ContainsFunc(res.Steps, func(s schema.RateStep) bool { return s.Verdict == VerdictRateHeld }) {
		return res, out, fmt.Errorf("%w: no step held its rate and was judged (each step's reasons are in steps.json)", ErrNotJudged)
	}
	return res, out, nil
}

// writeSteps writes steps.json and report.md for the steps res holds,
// with the knee among them.
func writeSteps(out string, res *schema.StepsResult) error {
	res.Knee, res.KneeWhy = knee(res.Steps)
	var js, md bytes.Buffer
	if err := report.JSON(&js, res); err != nil {
		return err
	}
	report.Steps(&md, res)
	return writeFiles(out, map[string][]byte{"steps.json": js.Bytes(), "report.md": md.Bytes()})
}

// rateStep is one step's row, from its summary.
func rateStep(s *schema.Summary, rate float64, dir string) schema.RateStep {
	w := s.Window
	return schema.RateStep{Rate: rate, Dir: dir, Verdict: s.Verdict, Reasons: s.Reasons, RPS: w.RPS, LatencyUS: w.LatencyUS, LatencyRawUS: w.LatencyRawUS,
		LateSends: w.LateSends, DroppedSends: w.DroppedSends, CPUUS: s.PerRequest.CPUUS, Allocs: s.PerRequest.Allocs, AllocBytes: s.PerRequest.AllocBytes,
		OffCPUUS: s.PerRequest.OffCPUUS}
}

// knee is the first step the driver could not hold, or whose p99 is
// more than twice the first step's.
func knee(steps []schema.RateStep) (float64, string) {
	if len(steps) == 0 {
		return 0, ""
	}
	first := steps[0].LatencyUS["p99"]
	for i, s := range steps {
		if s.Verdict != VerdictRateHeld {
			fell := slices.ContainsFunc(s.Reasons, func(r string) bool { return strings.Contains(r, "could not hold") })
			if fell {
				return s.Rate, "the driver could not hold it: the server fell behind the clock (" + s.Reasons[0] + ")"
			}
			return s.Rate, "the step was not judged: " + strings.Join(s.Reasons, "; ")
		}
		if i > 0 && s.LatencyUS["p99"] > 2*first {
			return s.Rate, fmt.Sprintf("p99 %d µs, more than twice the first step's %d µs", s.LatencyUS["p99"], first)
		}
	}
	return 0, ""
}
