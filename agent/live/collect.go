package live

import (
	"maps"
	"slices"
	"time"

	"github.com/perfspy/perfspy/agent/internal/spytable"
	"github.com/perfspy/perfspy/agent/livepush"
	"github.com/perfspy/perfspy/agent/wire"
)

// collector reads the recorders and the route table period after period.
type collector struct {
	routes spytable.RoutePeriods
	lives  []*spytable.Live
	sample int
	last   time.Time
	// bills are the requests' own bills (nil in a binary without them);
	// stacks the recorders' stacks by kind and slot, symbolized once (a
	// slot keeps its stack for the process's life).
	bills  *spytable.LiveBills
	stacks map[string]map[uint64][]wire.PCFrames
	// clears are the copy slots (index plus one) of memclr: a bill names
	// a slot, the periods' sites say its kind.
	clears map[uint64]bool
	missed uint64 // accounted requests that found no free bill, so far
}

// next reads a period that ends now.
func (c *collector) next(now time.Time) (*livepush.Period, error) {
	names, routes := c.routes.Next()
	data := map[string]*livepush.RouteData{}
	get := func(r string) *livepush.RouteData {
		if r == "" {
			r = "background"
		}
		if data[r] == nil {
			data[r] = &livepush.RouteData{}
		}
		return data[r]
	}
	for _, r := range routes {
		if r.Requests > 0 || r.Sampled > 0 {
			d := get(r.Name)
			d.Requests, d.Sampled = r.Requests, r.Sampled
		}
	}
	pd := &livepush.Period{From: c.last, Until: now, Dropped: map[string]uint64{}}
	c.last = now
	kinds := map[string]bool{}
	for _, l := range c.lives {
		sites, dropped, err := l.Table.Period()
		if err != nil {
			return nil, err
		}
		kinds[l.Kind] = true
		if l.Kind == "copies" {
			for _, st := range sites {
				if st.Words[spytable.Counters] == 1 {
					if c.clears == nil {
						c.clears = map[uint64]bool{}
					}
					c.clears[st.Words[1]+1] = true
				}
			}
		}
		if dropped > 0 {
			pd.Dropped[l.Kind] = dropped
		}
		switch rep := l.Report(sites, dropped, names).(type) {
		case *wire.AllocReport:
			for _, s := range rep.Sites {
				get(s.Route).Allocs = append(get(s.Route).Allocs, s)
			}
		case *wire.CopyReport:
			for _, s := range rep.Sites {
				get(s.Route).Copies = append(get(s.Route).Copies, s)
			}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(data)) {
		pd.Series = append(pd.Series, livepush.RouteSeries(pd, r, data[r], kinds, c.sample)...)
	}
	if c.bills != nil {
		rep := c.bills.Read(names)
		if d := rep.Missed - c.missed; d > 0 {
			pd.Dropped["bills"] = d
		}
		c.missed = rep.Missed
		if len(rep.Bills) > 0 {
			tail, median := c.billGroups(rep.Bills)
			pd.Series = append(pd.Series, livepush.BillSeries(pd, tail, median, len(rep.Bills), kinds["copies"], c.sample)...)
		}
	}
	return pd, nil
}

// billGroups ranks a period's bills as probe run ranks a window's
// (wire.RankBills), each group summed by stack.
func (c *collector) billGroups(bills []wire.Bill) (tail, median *livepush.BillGroup) {
	_, slow, mid := wire.RankBills(bills)
	return c.group(slow), c.group(mid)
}

// group sums a group's bills by slot, each slot's stack from its recorder.
func (c *collector) group(bills []wire.Bill) *livepush.BillGroup {
	g := &livepush.BillGroup{Requests: uint64(len(bills))}
	allocs, copies := map[uint64]*wire.AllocSite{}, map[uint64]*wire.CopySite{}
	for _, b := range bills {
		for _, a := range b.Allocs {
			s := allocs[a.Slot]
			if s == nil {
				s = &wire.AllocSite{Stack: c.stack("allocs", a.Slot), Slot: a.Slot}
				allocs[a.Slot] = s
			}
			s.Objects += a.Objects
			s.ReqBytes += a.Bytes
		}
		for _, cp := range b.Copies {
			s := copies[cp.Slot]
			if s == nil {
				s = &wire.CopySite{Kind: c.copyKind(cp.Slot), Stack: c.stack("copies", cp.Slot), Slot: cp.Slot}
				copies[cp.Slot] = s
			}
			s.Calls[0] += cp.Calls
			s.Bytes[0] += cp.Bytes
		}
	}
	for _, k := range slices.Sorted(maps.Keys(allocs)) {
		g.Allocs = append(g.Allocs, *allocs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(copies)) {
		g.Copies = append(g.Copies, *copies[k])
	}
	return g
}

// copyKind is a copy slot's kind.
func (c *collector) copyKind(slot uint64) string {
	if c.clears[slot] {
		return "memclr"
	}
	return "memmove"
}

// stack is the stack of the slot (its index plus one) of kind's
// recorder, symbolized, with the truncation mark.
func (c *collector) stack(kind string, slot uint64) []wire.PCFrames {
	if st, ok := c.stacks[kind][slot]; ok {
		return st
	}
	var st []wire.PCFrames
	for _, l := range c.lives {
		if l.Kind == kind && slot > 0 {
			pcs := make([]uintptr, l.Table.Depth)
			n, truncated := l.Table.Stack(int(slot-1), pcs)
			st = wire.MarkTruncated(c.bills.Symbolize(pcs[:n]), truncated)
		}
	}
	if c.stacks == nil {
		c.stacks = map[string]map[uint64][]wire.PCFrames{}
	}
	if c.stacks[kind] == nil {
		c.stacks[kind] = map[uint64][]wire.PCFrames{}
	}
	// A stack not yet stored (0 PCs) is read again next time.
	if len(st) > 0 {
		c.stacks[kind][slot] = st
	}
	return st
}
