package probe

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/stacks"
	"github.com/perfspy/perfspy/offcpu"
)

// SourceOffCPU names the off-CPU figures' source in summary.json.
const SourceOffCPU = "runtime-trace"

// windowSummary describes a window with its CPU per request.
func windowSummary(w *windowResult) *AttributionSummary {
	l := w.load
	a := &AttributionSummary{Seconds: round(l.Elapsed.Seconds(), 3), Requests: l.OK, Errors: l.Errors + l.Non2xx, RPS: round(l.RPS(), 1)}
	if l.OK > 0 {
		a.CPUUS = round(float64(w.cpu)/1e3/float64(l.OK), 3)
	}
	return a
}

// writeOffCPU turns the off-CPU window's trace, block, mutex and wall-clock
// files into per-request figures and profiles.
func writeOffCPU(out string, s *Summary, w *windowResult, raw rawFiles, comments []string) error {
	s.OffCPUWindow = windowSummary(w)
	n := float64(w.load.OK)
	if raw.trace != "" {
		f, err := os.Open(raw.trace)
		if err != nil {
			return err
		}
		res, err := offcpu.Parse(f, offcpu.Options{Exclude: instrumentPrefixes})
		f.Close()
		if err != nil {
			return fmt.Errorf("off-CPU: %w", err)
		}
		if n > 0 {
			s.PerRequest.OffCPUUS = map[string]float64{}
			for _, r := range offcpu.Reasons {
				s.PerRequest.OffCPUUS[r] = round(float64(res.Nanos[r])/1e3/n, 3)
			}
		}
		s.Sources["offcpu"] = SourceOffCPU
		p := res.Profile()
		p.Comments = comments
		if err := writeProfile(filepath.Join(out, "offcpu.pb.gz"), p); err != nil {
			return err
		}
		s.Files["offcpu"] = "offcpu.pb.gz"
	}
	for _, name := range []string{"block", "mutex"} {
		before, err := readProfile(raw.blocking + "." + name)
		if err != nil {
			return err
		}
		after, err := readProfile(raw.blocking + "." + name + ".end")
		if err != nil {
			return err
		}
		d, err := profileDelta(before, after)
		if err != nil {
			return fmt.Errorf("%s profile: %w", name, err)
		}
		d.Comments = comments
		if err := writeProfile(filepath.Join(out, name+".pb.gz"), d); err != nil {
			return err
		}
		s.Files[name] = name + ".pb.gz"
	}
	if raw.wallclock != "" {
		p, err := readWallclock(raw.wallclock, raw.wallclockPprof)
		if err != nil {
			return fmt.Errorf("wall-clock profile: %w", err)
		}
		p = dropInstruments(p)
		p.Comments = comments
		if err := writeProfile(filepath.Join(out, "wallclock.pb.gz"), p); err != nil {
			return err
		}
		s.Files["wallclock"] = "wallclock.pb.gz"
	}
	return nil
}

// dropInstruments removes the samples whose stack passes through
// perfspy's instruments (fgprof samples its own goroutine too).
func dropInstruments(p *profile.Profile) *profile.Profile {
	kept := p.Sample[:0]
	for _, s := range p.Sample {
		if !throughInstruments(s) {
			kept = append(kept, s)
		}
	}
	p.Sample = kept
	return p.Compact()
}

// writeOffCPUReport lists off-CPU time per request by reason.
func writeOffCPUReport(w io.Writer, s *Summary) {
	if s.PerRequest.OffCPUUS == nil {
		return
	}
	fmt.Fprintf(w, "\n## Off-CPU time per request (off-CPU window, %s)\n\n| reason | µs per request |\n|---|---:|\n", s.Sources["offcpu"])
	for _, r := range offcpu.Reasons {
		label := r
		if r == "net_idle" {
			label = "net_idle (keep-alive and background reads: the server waiting for the client; not in net)"
		}
		fmt.Fprintf(w, "| %s | %.2f |\n", label, s.PerRequest.OffCPUUS[r])
	}
	fmt.Fprintf(w, "\nA wait counts when it ends inside the window; goroutines blocked to the end waited for no request. The trace does not see the runtime's own epoll and futex calls or RawSyscall.\n")
}

// readWallclock reads the off-CPU window's wall-clock profile: the agent's
// report, made a pprof profile, or fgprof's own pprof file.
func readWallclock(path string, isPprof bool) (*profile.Profile, error) {
	if isPprof {
		return readProfile(path)
	}
	var rep wire.WallclockReport
	if err := wire.ReadJSON(path, &rep); err != nil {
		return nil, err
	}
	return WallclockProfile(&rep), nil
}

// WallclockProfile turns the agent's wall-clock report into a pprof
// profile with fgprof's sample types: samples/count and time/nanoseconds
// (each sample stands for one period of wall time of one goroutine).
func WallclockProfile(rep *wire.WallclockReport) *profile.Profile {
	period := int64(1e9)
	if rep.Hz > 0 {
		period /= int64(rep.Hz)
	}
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "time", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "wallclock", Unit: "nanoseconds"},
		Period:        period,
		DurationNanos: int64(rep.Seconds * 1e9),
	}
	b := stacks.NewBuilder(p)
	for _, s := range rep.Samples {
		p.Sample = append(p.Sample, &profile.Sample{
			Location: b.Locations(s.Stack),
			Value:    []int64{int64(s.Count), int64(s.Count) * period},
		})
	}
	return p
}
