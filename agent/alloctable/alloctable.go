// Package alloctable reads allocspy's runtime table for the probe agent. It is
// linked only into targets built with the allocspy overlay, which adds the
// runtime functions it pulls by linkname; probe's overlay imports it from
// the target's package main. It uses the standard library only.
package alloctable

import (
	"runtime"
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
	agent.RegisterCounter("bills", &bills{})
	// The live loop reads the same table with a baseline of its own.
	live := t
	spytable.RegisterLive(&spytable.Live{Kind: "allocs", Table: &live, Sampled: allocspyEnableSampled, Report: func(sites []spytable.Site, dropped uint64, names []string) any {
		return report(sites, dropped, names)
	}})
	spytable.RegisterLiveBills(&spytable.LiveBills{Start: perfspyBillStartLive, Read: liveRead, Symbolize: agent.Symbolize})
}

//go:linkname allocspyReadMemStats runtime.allocspyReadMemStats
func allocspyReadMemStats(m *runtime.MemStats, set func(), first bool)

//go:linkname allocspyOutside runtime.allocspyOutside
func allocspyOutside() (agentObjects, agentBytes, droppedBytes uint64)

type source struct {
	t spytable.Table
	// m0, m1 are the runtime's totals when the recorder went on and off,
	// read with the world stopped at that moment; out0 the counts kept
	// outside the table then. A window whose recorder counts every
	// request (not sampled) closes on them.
	m0, m1 runtime.MemStats
	out0   [3]uint64
	closes bool
}

// Begin snapshots the table and turns the recorder on.
func (s *source) Begin() error {
	allocspyIgnoreCurrent()
	if err := s.t.Begin(); err != nil {
		return err
	}
	s.closes = !spytable.Sampled()
	if !s.closes {
		allocspyEnableSampled()
		return nil
	}
	s.out0[0], s.out0[1], s.out0[2] = allocspyOutside()
	allocspyReadMemStats(&s.m0, func() { allocspyEnable(true) }, false)
	return nil
}

// End turns the recorder off and writes the window's sites, symbolized, to
// path as JSON (wire.AllocReport), with the runtime's own totals of the
// window when it counted every request.
func (s *source) End(path string) error {
	if s.closes {
		allocspyReadMemStats(&s.m1, func() { allocspyEnable(false) }, true)
	} else {
		allocspyEnable(false)
	}
	sites, dropped, err := s.t.End()
	if err != nil {
		return err
	}
	rep := report(sites, dropped, spytable.Routes())
	if s.closes {
		ao, ab, db := allocspyOutside()
		rep.Closure = &wire.AllocClosure{
			RuntimeObjects: s.m1.Mallocs - s.m0.Mallocs,
			RuntimeBytes:   s.m1.TotalAlloc - s.m0.TotalAlloc,
			AgentObjects:   ao - s.out0[0],
			AgentBytes:     ab - s.out0[1],
			DroppedBytes:   db - s.out0[2],
		}
	}
	return wire.WriteJSON(path, rep)
}

// report symbolizes a window's or a period's sites; names are the routes'.
func report(sites []spytable.Site, dropped uint64, names []string) *wire.AllocReport {
	rep := &wire.AllocReport{Dropped: dropped}
	for _, st := range sites {
		site := wire.AllocSiteOf(wire.MarkTruncated(agent.Symbolize(st.PCs), st.Truncated), st.Delta[spytable.Counters:])
		site.Route = spytable.RouteName(names, st.Words[spytable.RouteWord])
		site.Slot = st.Words[1] + 1
		rep.Sites = append(rep.Sites, site)
	}
	return rep
}
