package profwire

import (
	"math"

	"github.com/google/pprof/profile"
)

// FromProfile is a parsed profile in Decode's form (for a profile that
// came from a store, a legacy text format or a selection of labels, or
// one built by hand). Each sample is a stack of its own; nothing is
// interned.
func FromProfile(pp *profile.Profile) *Profile {
	c := &converter{p: &Profile{DefaultType: pp.DefaultSampleType, Comments: pp.Comments, Samples: len(pp.Sample), nt: len(pp.SampleType), lineOff: []int32{0}, locIndex: &ids{dense: []int32{0}}},
		fns: map[*profile.Function]int32{}, locs: map[*profile.Location]int32{}}
	p := c.p
	for _, st := range pp.SampleType {
		p.Types = append(p.Types, ValueType{st.Type, st.Unit})
	}
	p.Negative, p.Overflow = make([]bool, p.nt), make([]bool, p.nt)
	// The tables' order first; a hand-made profile may leave them out.
	for _, l := range pp.Location {
		c.loc(l)
	}
	total, neg := make([]int64, p.nt), make([]int64, p.nt)
	for _, s := range pp.Sample {
		p.keyOff = append(p.keyOff, uint32(len(p.extra)))
		for _, l := range s.Location {
			p.extra = appendUvarint(p.extra, uint64(c.loc(l))+1)
		}
		p.keyEnd = append(p.keyEnd, uint32(len(p.extra)))
		p.keyExtra = append(p.keyExtra, true)
		for t := 0; t < p.nt; t++ {
			v := int64(0)
			if t < len(s.Value) {
				v = s.Value[t]
			}
			p.vals = append(p.vals, v)
			switch {
			case v < 0 && v < math.MinInt64-neg[t]:
				p.Negative[t], p.Overflow[t], neg[t] = true, true, math.MinInt64
			case v < 0:
				p.Negative[t] = true
				neg[t] += v
			case v > math.MaxInt64-total[t]:
				p.Overflow[t], total[t] = true, math.MaxInt64
			default:
				total[t] += v
			}
		}
	}
	return p
}

type converter struct {
	p    *Profile
	fns  map[*profile.Function]int32
	locs map[*profile.Location]int32
}

func (c *converter) loc(l *profile.Location) int32 {
	if i, ok := c.locs[l]; ok {
		return i
	}
	p := c.p
	i := int32(p.NumLocations())
	c.locs[l] = i
	p.locIndex.dense = append(p.locIndex.dense, i+1) // id i+1
	if l == nil {
		l = &profile.Location{}
	}
	for _, ln := range l.Line {
		p.addLine(c.fn(ln.Function), ln.Line)
	}
	p.endLocation(l.Address)
	return i
}

// fn is a function's index; a line with no function (which
// profile.Parse refuses) is "(unknown)".
func (c *converter) fn(f *profile.Function) int32 {
	if i, ok := c.fns[f]; ok {
		return i
	}
	name := "(unknown)"
	if f != nil {
		name = f.Name
	}
	p := c.p
	i := int32(len(p.fnName))
	c.fns[f] = i
	p.fnName = append(p.fnName, int64(len(p.strs)))
	p.strs = append(p.strs, span{len(p.data), len(p.data) + len(name)})
	p.data = append(p.data, name...)
	return i
}
