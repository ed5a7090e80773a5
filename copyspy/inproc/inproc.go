// Package inproc reads copyspy's runtime table for the probe agent. It is
// linked only into targets built with the copyspy overlay, which adds the
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

//go:linkname copyspyEnable runtime.copyspyEnable
func copyspyEnable(on bool)

//go:linkname copyspyIgnoreCurrent runtime.copyspyIgnoreCurrent
func copyspyIgnoreCurrent()

//go:linkname copyspyRead runtime.copyspyRead
func copyspyRead(dst []uint64) (n int, dropped uint64, full bool)

//go:linkname copyspyLayout runtime.copyspyLayout
func copyspyLayout() (slots, depth, slotSize int)

// Slot layout in words, as the runtime file declares it.
const (
	depth    = 6
	words    = 16
	wKey     = 0
	wPCs     = 1
	wKind    = wPCs + depth
	wCalls   = wKind + 1
	wBytes   = wCalls + 4
	nBuckets = 4
)

func init() {
	agent.RegisterCounter("copies", &source{})
}

type slot struct {
	pcs          [depth]uintptr
	kind         uint64
	calls, bytes [nBuckets]uint64
}

type source struct {
	buf     []uint64
	before  map[uint64]slot
	dropped uint64
}

// Begin snapshots the table and turns the recorder on.
func (s *source) Begin() error {
	slots, d, size := copyspyLayout()
	if d != depth || size != words*8 {
		return fmt.Errorf("copyspy: runtime table layout depth %d size %d, this reader knows depth %d size %d", d, size, depth, words*8)
	}
	if s.buf == nil {
		s.buf = make([]uint64, slots*words)
	}
	copyspyIgnoreCurrent()
	var err error
	s.before, s.dropped, err = s.snapshot()
	if err != nil {
		return err
	}
	copyspyEnable(true)
	return nil
}

func (s *source) snapshot() (map[uint64]slot, uint64, error) {
	n, dropped, full := copyspyRead(s.buf)
	if full {
		return nil, 0, errors.New("copyspy: snapshot buffer too small")
	}
	m := make(map[uint64]slot, n/words)
	for i := 0; i+words <= n; i += words {
		w := s.buf[i : i+words]
		var sl slot
		for j := 0; j < depth; j++ {
			sl.pcs[j] = uintptr(w[wPCs+j])
		}
		sl.kind = w[wKind]
		copy(sl.calls[:], w[wCalls:wCalls+nBuckets])
		copy(sl.bytes[:], w[wBytes:wBytes+nBuckets])
		m[w[wKey]] = sl
	}
	return m, dropped, nil
}

// End turns the recorder off, takes the second snapshot and writes the
// window's sites, symbolized, to path as JSON (agent.CopyReport).
func (s *source) End(path string) error {
	copyspyEnable(false)
	after, dropped, err := s.snapshot()
	if err != nil {
		return err
	}
	rep := agent.CopyReport{Dropped: dropped - s.dropped}
	for key, a := range after {
		b := s.before[key]
		var site agent.CopySite
		any := false
		for i := 0; i < nBuckets; i++ {
			site.Calls[i] = a.calls[i] - b.calls[i]
			site.Bytes[i] = a.bytes[i] - b.bytes[i]
			any = any || site.Calls[i] != 0
		}
		if !any {
			continue
		}
		site.Kind = "memmove"
		if a.kind == 1 {
			site.Kind = "memclr"
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
