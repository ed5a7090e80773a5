// Package inproc reads allocspy's runtime table for the probe agent. It is
// linked only into targets built with the allocspy overlay, which adds the
// runtime functions it pulls by linkname; probe's overlay imports it from
// the target's package main. It uses the standard library only.
package inproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	_ "unsafe" // for go:linkname

	"github.com/perfspy/perfspy/probe/agent"
)

//go:linkname allocspyEnable runtime.allocspyEnable
func allocspyEnable(on bool)

//go:linkname allocspyIgnoreCurrent runtime.allocspyIgnoreCurrent
func allocspyIgnoreCurrent()

//go:linkname allocspyRead runtime.allocspyRead
func allocspyRead(dst []uint64) (n int, dropped uint64, full bool)

//go:linkname allocspyLayout runtime.allocspyLayout
func allocspyLayout() (slots, depth, slotSize int)

// Slot layout in words, as the runtime file declares it.
const (
	depth       = 6
	words       = 16
	wKey        = 0
	wPCs        = 1
	wObjects    = wPCs + depth
	wBlocks     = wObjects + 1
	wReqBytes   = wBlocks + 1
	wAllocBytes = wReqBytes + 1
)

func init() {
	agent.RegisterCounter("allocs", &source{})
}

type slot struct {
	pcs                                   [depth]uintptr
	objects, blocks, reqBytes, allocBytes uint64
}

type source struct {
	buf     []uint64
	before  map[uint64]slot
	dropped uint64
}

// Begin snapshots the table and turns the recorder on.
func (s *source) Begin() error {
	slots, d, size := allocspyLayout()
	if d != depth || size != words*8 {
		return fmt.Errorf("allocspy: runtime table layout depth %d size %d, this reader knows depth %d size %d", d, size, depth, words*8)
	}
	if s.buf == nil {
		s.buf = make([]uint64, slots*words)
	}
	allocspyIgnoreCurrent()
	var err error
	if s.before, s.dropped, err = s.snapshot(); err != nil {
		return err
	}
	allocspyEnable(true)
	return nil
}

func (s *source) snapshot() (map[uint64]slot, uint64, error) {
	n, dropped, full := allocspyRead(s.buf)
	if full {
		return nil, 0, errors.New("allocspy: snapshot buffer too small")
	}
	m := make(map[uint64]slot, n/words)
	for i := 0; i+words <= n; i += words {
		w := s.buf[i : i+words]
		var sl slot
		for j := 0; j < depth; j++ {
			sl.pcs[j] = uintptr(w[wPCs+j])
		}
		sl.objects, sl.blocks, sl.reqBytes, sl.allocBytes = w[wObjects], w[wBlocks], w[wReqBytes], w[wAllocBytes]
		m[w[wKey]] = sl
	}
	return m, dropped, nil
}

// End turns the recorder off, takes the second snapshot and writes the
// window's sites, symbolized, to path as JSON (agent.AllocReport).
func (s *source) End(path string) error {
	allocspyEnable(false)
	after, dropped, err := s.snapshot()
	if err != nil {
		return err
	}
	rep := agent.AllocReport{Dropped: dropped - s.dropped}
	for key, a := range after {
		b := s.before[key]
		site := agent.AllocSite{
			Objects: a.objects - b.objects, Blocks: a.blocks - b.blocks,
			ReqBytes: a.reqBytes - b.reqBytes, AllocBytes: a.allocBytes - b.allocBytes,
		}
		if site.Objects == 0 {
			continue
		}
		site.Stack = agent.Symbolize(a.pcs[:])
		rep.Sites = append(rep.Sites, site)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(f).Encode(&rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
