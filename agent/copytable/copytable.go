// Package copytable reads copyspy's runtime table for the probe agent. It is
// linked only into targets built with the copyspy overlay, which adds the
// runtime functions it pulls by linkname; probe's overlay imports it from
// the target's package main. It uses the standard library only.
package copytable

import (
	_ "unsafe" // for go:linkname

	"github.com/perfspy/perfspy/agent"
	"github.com/perfspy/perfspy/agent/internal/spytable"
	"github.com/perfspy/perfspy/agent/wire"
)

//go:linkname copyspyEnable runtime.copyspyEnable
func copyspyEnable(on bool)

//go:linkname copyspyEnableSampled runtime.copyspyEnableSampled
func copyspyEnableSampled()

//go:linkname copyspyIgnoreCurrent runtime.copyspyIgnoreCurrent
func copyspyIgnoreCurrent()

//go:linkname copyspyRead runtime.copyspyRead
func copyspyRead(dst []uint64) (n int, dropped uint64, full bool)

//go:linkname copyspyStackOf runtime.copyspyStackOf
func copyspyStackOf(index int, dst []uintptr) (n int, truncated bool)

//go:linkname copyspyLayout runtime.copyspyLayout
func copyspyLayout() (slots, depth, slotSize int)

// Slot layout, as the runtime file declares it: 16 words (key, index,
// padding, then the counter words wire.CopySiteOf reads), and stacks of up to
// 128 PCs read apart.
const (
	depth = 128
	words = 16
)

func init() {
	t := spytable.Table{Name: "copyspy", Depth: depth, Words: words, Read: copyspyRead, Stack: copyspyStackOf, Layout: copyspyLayout}
	agent.RegisterCounter("copies", &source{t: t})
	// The live loop reads the same table with a baseline of its own.
	live := t
	spytable.RegisterLive(&spytable.Live{Kind: "copies", Table: &live, Sampled: copyspyEnableSampled, Report: func(sites []spytable.Site, dropped uint64, names []string) any {
		return report(sites, dropped, names)
	}})
}

type source struct{ t spytable.Table }

// Begin snapshots the table and turns the recorder on.
func (s *source) Begin() error {
	copyspyIgnoreCurrent()
	if err := s.t.Begin(); err != nil {
		return err
	}
	if spytable.Sampled() {
		copyspyEnableSampled()
	} else {
		copyspyEnable(true)
	}
	return nil
}

// End turns the recorder off and writes the window's sites, symbolized, to
// path as JSON (wire.CopyReport).
func (s *source) End(path string) error {
	copyspyEnable(false)
	sites, dropped, err := s.t.End()
	if err != nil {
		return err
	}
	return wire.WriteJSON(path, report(sites, dropped, spytable.Routes()))
}

// report symbolizes a window's or a period's sites; names are the routes'.
func report(sites []spytable.Site, dropped uint64, names []string) *wire.CopyReport {
	rep := &wire.CopyReport{Dropped: dropped}
	for _, st := range sites {
		site := wire.CopySiteOf(wire.MarkTruncated(agent.Symbolize(st.PCs), st.Truncated), st.Words[spytable.Counters], st.Delta[spytable.Counters:])
		site.Route = spytable.RouteName(names, st.Words[spytable.RouteWord])
		site.Slot = st.Words[1] + 1
		rep.Sites = append(rep.Sites, site)
	}
	return rep
}
