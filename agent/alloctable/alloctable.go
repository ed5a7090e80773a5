// Package alloctable reads allocspy's runtime table for the probe agent. It is
// linked only into targets built with the allocspy overlay, which adds the
// runtime functions it pulls by linkname; probe's overlay imports it from
// the target's package main. It uses the standard library only.
package alloctable

import (
	_ "unsafe" // for go:linkname

	"github.com/perfspy/perfspy/agent"
	"github.com/perfspy/perfspy/agent/internal/spytable"
	"github.com/perfspy/perfspy/agent/wire"
)

//go:linkname allocspyEnable runtime.allocspyEnable
func allocspyEnable(on bool)

//go:linkname allocspyEnableSampled runtime.allocspyEnableSampled
func allocspyEnableSampled()

//go:linkname allocspyIgnoreCurrent runtime.allocspyIgnoreCurrent
func allocspyIgnoreCurrent()

//go:linkname allocspyRead runtime.allocspyRead
func allocspyRead(dst []uint64) (n int, dropped uint64, full bool)

//go:linkname allocspyStackOf runtime.allocspyStackOf
func allocspyStackOf(index int, dst []uintptr) (n int, truncated bool)

//go:linkname allocspyLayout runtime.allocspyLayout
func allocspyLayout() (slots, depth, slotSize int)

// Slot layout, as the runtime file declares it: 16 words (key, index,
// padding, then the counter words wire.AllocSiteOf reads), and stacks of up to
// 128 PCs read apart.
const (
	depth = 128
	words = 16
)

func init() {
	t := spytable.Table{Name: "allocspy", Depth: depth, Words: words, Read: allocspyRead, Stack: allocspyStackOf, Layout: allocspyLayout}
	agent.RegisterCounter("allocs", &source{t: t})
	// The live loop reads the same table with a baseline of its own.
	live := t
	spytable.RegisterLive(&spytable.Live{Kind: "allocs", Table: &live, Sampled: allocspyEnableSampled, Report: func(sites []spytable.Site, dropped uint64, names []string) any {
		return report(sites, dropped, names)
	}})
}

type source struct{ t spytable.Table }

// Begin snapshots the table and turns the recorder on.
func (s *source) Begin() error {
	allocspyIgnoreCurrent()
	if err := s.t.Begin(); err != nil {
		return err
	}
	if spytable.Sampled() {
		allocspyEnableSampled()
	} else {
		allocspyEnable(true)
	}
	return nil
}

// End turns the recorder off and writes the window's sites, symbolized, to
// path as JSON (wire.AllocReport).
func (s *source) End(path string) error {
	allocspyEnable(false)
	sites, dropped, err := s.t.End()
	if err != nil {
		return err
	}
	return wire.WriteJSON(path, report(sites, dropped, spytable.Routes()))
}

// report symbolizes a window's or a period's sites; names are the routes'.
func report(sites []spytable.Site, dropped uint64, names []string) *wire.AllocReport {
	rep := &wire.AllocReport{Dropped: dropped}
	for _, st := range sites {
		site := wire.AllocSiteOf(wire.MarkTruncated(agent.Symbolize(st.PCs), st.Truncated), st.Delta[spytable.Counters:])
		site.Route = spytable.RouteName(names, st.Words[spytable.RouteWord])
		rep.Sites = append(rep.Sites, site)
	}
	return rep
}
