// Package spytable reads the call-site tables that perfspy's runtime
// overlays (copyspy, allocspy) keep, for their in-process readers. Each
// slot is a fixed number of words: a key, its index in the table (as the
// runtime's reader writes it), padding, then counters; a slot's stack is
// read apart, by index. It uses the standard library only: it is linked
// into targets.
package spytable

import (
	"errors"
	"fmt"

	"github.com/perfspy/perfspy/agent/wire"
)

// Table is one runtime table and the window over it.
type Table struct {
	Name   string
	Depth  int // the most PCs a stack keeps
	Words  int // words per slot
	Read   func(dst []uint64) (n int, dropped uint64, full bool)
	Stack  func(index int, dst []uintptr) (n int, truncated bool)
	Layout func() (slots, depth, slotSize int)

	buf     []uint64
	before  map[uint64][]uint64
	dropped uint64
}

// Site is one slot's change over the window.
type Site struct {
	PCs       []uintptr // innermost first
	Truncated bool      // frames further out than Depth were left out
	Words     []uint64  // the slot after the window (for fields that do not count)
	Delta     []uint64  // after minus before, word by word
}

// Counters is the first counter word of a slot: words before it hold the
// key, the index and padding.
const Counters = 7

// Begin checks the runtime's layout and takes the first snapshot.
func (t *Table) Begin() error {
	slots, d, size := t.Layout()
	if d != t.Depth || size != t.Words*8 {
		return fmt.Errorf("%s: runtime table layout depth %d size %d, this reader knows depth %d size %d", t.Name, d, size, t.Depth, t.Words*8)
	}
	if t.buf == nil {
		t.buf = make([]uint64, slots*t.Words)
	}
	var err error
	t.before, t.dropped, err = t.snapshot()
	return err
}

func (t *Table) snapshot() (map[uint64][]uint64, uint64, error) {
	n, dropped, full := t.Read(t.buf)
	if full {
		return nil, 0, errors.New(t.Name + ": snapshot buffer too small")
	}
	m := make(map[uint64][]uint64, n/t.Words)
	for i := 0; i+t.Words <= n; i += t.Words {
		m[t.buf[i]] = append([]uint64(nil), t.buf[i:i+t.Words]...)
	}
	return m, dropped, nil
}

// End takes the second snapshot and returns the slots that changed, and
// the allocations or copies dropped in the window for want of a slot.
func (t *Table) End() ([]Site, uint64, error) {
	after, dropped, err := t.snapshot()
	if err != nil {
		return nil, 0, err
	}
	return t.diff(after), dropped - t.dropped, nil
}

// Period returns what End returns and starts the next period from here:
// the live loop (agent/live) reads one table period after period.
func (t *Table) Period() ([]Site, uint64, error) {
	after, dropped, err := t.snapshot()
	if err != nil {
		return nil, 0, err
	}
	sites, d := t.diff(after), dropped-t.dropped
	t.before, t.dropped = after, dropped
	return sites, d, nil
}

// diff returns the slots of after whose counters moved since t.before.
func (t *Table) diff(after map[uint64][]uint64) []Site {
	var out []Site
	for key, a := range after {
		b := t.before[key]
		s := Site{Words: a, Delta: make([]uint64, t.Words)}
		changed := false
		for i := Counters; i < t.Words; i++ {
			if b != nil {
				s.Delta[i] = a[i] - b[i]
			} else {
				s.Delta[i] = a[i]
			}
			changed = changed || s.Delta[i] != 0
		}
		if !changed {
			continue
		}
		pcs := make([]uintptr, t.Depth)
		n, truncated := t.Stack(int(a[1]), pcs)
		s.PCs, s.Truncated = pcs[:n], truncated
		out = append(out, s)
	}
	return out
}

// Live is a recorder as the live loop drives it: a Table of its own (apart
// from probe's window), the switch to the recorder's sampled mode, and how
// a period's sites become a report (*wire.AllocReport, *wire.CopyReport).
type Live struct {
	Kind    string // the counter's name: "allocs", "copies"
	Table   *Table
	Sampled func()
	Report  func(sites []Site, dropped uint64, names []string) any
}

var lives []*Live

// RegisterLive adds a recorder for the live loop; it is called from an init.
func RegisterLive(l *Live) { lives = append(lives, l) }

// Lives are the recorders built in, in the order they registered.
func Lives() []*Live { return lives }

// RouteWord is the slot word that holds the request mark the site was
// counted under: a route's index, 0 for the background.
const RouteWord = 2

// LiveBills is the requests' bills as the live loop reads them (package
// alloctable registers it): Start turns live billing on (each sampled
// request takes a free bill), Read returns the bills of the requests that
// ended since the last Read and gives them back; Symbolize turns a
// recorder's stack into frames.
type LiveBills struct {
	Start     func()
	Read      func(names []string) *wire.BillReport
	Symbolize func(pcs []uintptr) []wire.PCFrames
}

var liveBills *LiveBills

// RegisterLiveBills sets the live loop's bills; it is called from an init.
func RegisterLiveBills(b *LiveBills) { liveBills = b }

// Bills is the live loop's bills, nil when the binary has none.
func Bills() *LiveBills { return liveBills }
