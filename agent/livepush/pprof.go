package livepush

import (
	"github.com/perfspy/perfspy/agent/wire"
)

// The agent links into the user's program and uses the standard library
// only, so it writes the pprof format (profile.proto) itself: the fields
// below are profile.proto's numbers.
const (
	profSampleType = 1
	profSample     = 2
	profLocation   = 4
	profFunction   = 5
	profStrings    = 6
	profTime       = 9
	profDuration   = 10
	profPeriodType = 11
	profPeriod     = 12
	profComment    = 13
	profDefault    = 14
)

// protoBuf appends protocol-buffer fields.
type protoBuf struct{ b []byte }

func (p *protoBuf) varint(x uint64) {
	for x >= 0x80 {
		p.b = append(p.b, byte(x)|0x80)
		x >>= 7
	}
	p.b = append(p.b, byte(x))
}

func (p *protoBuf) tag(field, wireType int) { p.varint(uint64(field)<<3 | uint64(wireType)) }

// uint writes a varint field; 0 is the default and is left out.
func (p *protoBuf) uint(field int, x uint64) {
	if x != 0 {
		p.tag(field, 0)
		p.varint(x)
	}
}

func (p *protoBuf) int(field int, x int64) { p.uint(field, uint64(x)) }

func (p *protoBuf) bytes(field int, b []byte) {
	p.tag(field, 2)
	p.varint(uint64(len(b)))
	p.b = append(p.b, b...)
}

func (p *protoBuf) string(field int, s string) {
	p.tag(field, 2)
	p.varint(uint64(len(s)))
	p.b = append(p.b, s...)
}

// packed writes a packed repeated varint field.
func (p *protoBuf) packed(field int, xs []uint64) {
	if len(xs) == 0 {
		return
	}
	var q protoBuf
	for _, x := range xs {
		q.varint(x)
	}
	p.bytes(field, q.b)
}

// message writes a nested message that fill encodes.
func (p *protoBuf) message(field int, fill func(q *protoBuf)) {
	var q protoBuf
	fill(&q)
	p.bytes(field, q.b)
}

// profileBuilder gathers one profile: sample types, samples on stacks of
// wire.PCFrames, functions and locations deduplicated, strings interned.
type profileBuilder struct {
	strs    []string
	strIdx  map[string]int64
	types   [][2]int64 // (type, unit)
	period  [2]int64
	deflt   int64
	samples []profSampleRec
	funcs   map[[2]string]uint64
	funcRec [][3]int64 // name, filename (system name = name)
	locs    map[locKey]uint64
	locRec  []locRec
	comment []int64

	timeNanos, durationNanos int64
}

type profSampleRec struct {
	locs   []uint64
	values []int64
	labels [][2]int64
}

type locKey struct {
	pc    uint64
	lines int
}

type locRec struct {
	addr  uint64
	lines [][2]int64 // function id, line
}

// newProfile starts a profile with sample types (type, unit pairs), the
// period type and the default sample type.
func newProfile(types [][2]string, period [2]string, deflt string) *profileBuilder {
	b := &profileBuilder{strIdx: map[string]int64{}, funcs: map[[2]string]uint64{}, locs: map[locKey]uint64{}}
	b.str("") // string 0 is ""
	for _, t := range types {
		b.types = append(b.types, [2]int64{b.str(t[0]), b.str(t[1])})
	}
	b.period = [2]int64{b.str(period[0]), b.str(period[1])}
	b.deflt = b.str(deflt)
	return b
}

func (b *profileBuilder) str(s string) int64 {
	if i, ok := b.strIdx[s]; ok {
		return i
	}
	i := int64(len(b.strs))
	b.strs = append(b.strs, s)
	b.strIdx[s] = i
	return i
}

func (b *profileBuilder) addComment(c string) { b.comment = append(b.comment, b.str(c)) }

// stack returns the location IDs of a stack, innermost first, as
// wire.Logical shapes it; a PC's inlined frames are one location's lines.
func (b *profileBuilder) stack(stack []wire.PCFrames) []uint64 {
	stack = wire.Logical(stack)
	ids := make([]uint64, 0, len(stack))
	for _, pf := range stack {
		k := locKey{pf.PC, len(pf.Frames)}
		id, ok := b.locs[k]
		if !ok {
			rec := locRec{addr: pf.PC}
			for _, f := range pf.Frames {
				rec.lines = append(rec.lines, [2]int64{int64(b.function(f.Func, f.File)), int64(f.Line)})
			}
			b.locRec = append(b.locRec, rec)
			id = uint64(len(b.locRec))
			b.locs[k] = id
		}
		ids = append(ids, id)
	}
	return ids
}

// frame returns the location of a frame of its own (no PC): the root the
// requests' sample sits on.
func (b *profileBuilder) frame(name string) []uint64 {
	return b.stack([]wire.PCFrames{{Frames: []wire.Frame{{Func: name}}}})
}

// sampleStack is stack's locations, or the frame NoStackFrame when none
// is left: the store drops samples without a stack.
func (b *profileBuilder) sampleStack(stack []wire.PCFrames) []uint64 {
	if ids := b.stack(stack); len(ids) > 0 {
		return ids
	}
	return b.frame(NoStackFrame)
}

// NoStackFrame is profstore.NoStackFrame.
const NoStackFrame = "[no stack]"

func (b *profileBuilder) function(name, file string) uint64 {
	k := [2]string{name, file}
	if id, ok := b.funcs[k]; ok {
		return id
	}
	b.funcRec = append(b.funcRec, [3]int64{b.str(name), b.str(file)})
	id := uint64(len(b.funcRec))
	b.funcs[k] = id
	return id
}

// add adds a sample; labels are key, value pairs.
func (b *profileBuilder) add(locs []uint64, values []int64, labels ...string) {
	s := profSampleRec{locs: locs, values: values}
	for i := 0; i+1 < len(labels); i += 2 {
		s.labels = append(s.labels, [2]int64{b.str(labels[i]), b.str(labels[i+1])})
	}
	b.samples = append(b.samples, s)
}

// encode writes the profile, uncompressed.
func (b *profileBuilder) encode() []byte {
	var p protoBuf
	for _, t := range b.types {
		p.message(profSampleType, func(q *protoBuf) { q.int(1, t[0]); q.int(2, t[1]) })
	}
	for _, s := range b.samples {
		p.message(profSample, func(q *protoBuf) {
			q.packed(1, s.locs)
			vals := make([]uint64, len(s.values))
			for i, v := range s.values {
				vals[i] = uint64(v)
			}
			q.packed(2, vals)
			for _, l := range s.labels {
				q.message(3, func(r *protoBuf) { r.int(1, l[0]); r.int(2, l[1]) })
			}
		})
	}
	for i, l := range b.locRec {
		p.message(profLocation, func(q *protoBuf) {
			q.uint(1, uint64(i+1))
			q.uint(3, l.addr)
			for _, ln := range l.lines {
				q.message(4, func(r *protoBuf) { r.int(1, ln[0]); r.int(2, ln[1]) })
			}
		})
	}
	for i, f := range b.funcRec {
		p.message(profFunction, func(q *protoBuf) {
			q.uint(1, uint64(i+1))
			q.int(2, f[0])
			q.int(3, f[0])
			q.int(4, f[1])
		})
	}
	for _, s := range b.strs {
		p.string(profStrings, s)
	}
	p.int(profTime, b.timeNanos)
	p.int(profDuration, b.durationNanos)
	p.message(profPeriodType, func(q *protoBuf) { q.int(1, b.period[0]); q.int(2, b.period[1]) })
	p.int(profPeriod, 1)
	cs := make([]uint64, len(b.comment))
	for i, c := range b.comment {
		cs[i] = uint64(c)
	}
	p.packed(profComment, cs)
	p.int(profDefault, b.deflt)
	return p.b
}
