// Package wallclock adds an fgprof wall-clock profile to the probe agent: it
// samples every goroutine, running or not, at 99 Hz, the user's view of
// where a request's time goes. probe's overlay imports it from the
// target's package main when the off-CPU window asks for it.
//
// Its cost grows with the number of goroutines (each sample walks them
// all), which is why the execution trace, not this profile, gives the
// off-CPU figures.
package wallclock

import (
	"bytes"
	"errors"
	"os"

	"github.com/felixge/fgprof"

	"github.com/perfspy/perfspy/probe/agent"
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
