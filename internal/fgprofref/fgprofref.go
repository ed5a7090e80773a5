// Package fgprofref links fgprof into a perfspy target as the reference
// wall-clock profiler of `probe cost -what offcpu`. It registers under the
// counter name "wallclock", like agent/wallclock, and is only built into
// perfspy's own targets for that benchmark: fgprof is a module of its own
// and would change a user's build list.
package fgprofref

import (
	"bytes"
	"errors"
	"os"

	"github.com/felixge/fgprof"

	"github.com/perfspy/perfspy/agent"
)

func init() {
	agent.RegisterCounter("wallclock", &profiler{})
}

type profiler struct {
	buf  bytes.Buffer
	stop func() error
}

// Begin starts fgprof.
func (p *profiler) Begin() error {
	if p.stop != nil {
		return errors.New("wallclock profile already running")
	}
	p.buf.Reset()
	p.stop = fgprof.Start(&p.buf, fgprof.FormatPprof)
	return nil
}

// End stops fgprof and writes its pprof profile to path.
func (p *profiler) End(path string) error {
	if p.stop == nil {
		return errors.New("wallclock profile not running")
	}
	err := p.stop()
	p.stop = nil
	if err != nil {
		return err
	}
	return os.WriteFile(path, p.buf.Bytes(), 0o644)
}
