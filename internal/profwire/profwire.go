// Package profwire reads an encoded pprof profile (uncompressed protobuf)
// in one pass over its bytes, into what flame graphs and comparisons need
// and no more: the distinct stacks, each with its samples' values added
// up, the locations' functions and lines, and the functions' names.
//
// Samples are interned by their encoded location ids, before any id is
// decoded: most samples of a big profile share a stack, so the work after
// the pass grows with the distinct stacks, not with samples × depth. No Go
// object is made per sample or per location, and strings stay slices of
// the input until they are asked for.
//
// A profile that go tool pprof's parser (profile.Parse) refuses, this
// package refuses too (the same checks: ids, tables, value counts), so
// that callers can fall back to that parser for its verdict; one it reads,
// this package reads to the same totals and stacks.
package profwire

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
)

// ErrMalformed wraps every error of Decode: the bytes are not a protobuf
// profile that profile.Parse would read.
var ErrMalformed = errors.New("not a well-formed protobuf profile")

// ValueType is a sample type.
type ValueType struct{ Type, Unit string }

// Profile is a decoded profile. Locations and functions are numbered from
// 0 in the order the profile lists them; stacks in the order of their
// first sample.
type Profile struct {
	Types       []ValueType
	DefaultType string
	Comments    []string
	Samples     int // samples read, before interning
	// Negative is, per sample type, whether a sample had a negative value.
	Negative []bool
	// Overflow is, per sample type, whether its positive values, or its
	// negative ones, add up past what an int64 holds.
	Overflow []bool

	data []byte

	// Stack i is its samples' encoded location ids (leaf first):
	// data[keyOff[i]:keyEnd[i]], or extra's when keyExtra[i] (a sample
	// whose ids were not packed, packed here).
	keyOff, keyEnd []uint32
	keyExtra       []bool
	extra          []byte
	locIndex       *ids
	vals           []int64 // stack i's values are vals[i*nt:(i+1)*nt]
	nt             int

	lineOff  []int32 // location i's lines are lineFn/lineNo[lineOff[i]:lineOff[i+1]]
	lineFn   []int32 // a function index; innermost first, as pprof lists them
	lineNo   []int32 // or lineNo64, once a line number is past an int32
	lineNo64 []int64
	// addr is the address of each location that has no line (an
	// unsymbolized one, drawn as its address); others' are not kept.
	addr map[int32]uint64

	fnName []int64 // a string index
	strs   []span  // the string table, as spans of data
}

type span struct{ off, end int }

// NumStacks is the number of distinct stacks.
func (p *Profile) NumStacks() int { return len(p.keyOff) }

// Stack appends stack i's locations, leaf first, to buf.
func (p *Profile) Stack(i int, buf []int32) []int32 {
	k := p.key(int32(i))
	for len(k) > 0 {
		id, n := uvarint(k) // checked by finish
		k = k[n:]
		l, _ := p.locIndex.index(id)
		buf = append(buf, l)
	}
	return buf
}

// IDBytes is the size of stack i's encoded location ids: about that of
// its frames as varints.
func (p *Profile) IDBytes(i int) int { return int(p.keyEnd[i] - p.keyOff[i]) }

// RootCursor is where a walk of stack i from its root starts (Inward).
func (p *Profile) RootCursor(i int) uint32 { return p.keyEnd[i] }

// Inward is the location at cursor c of stack i, walking from the root
// to the leaf, and the cursor of the next; ok is false past the leaf. It
// reads the encoded ids backward: a varint's last byte is the one below
// 0x80, and the bytes before it in the same varint are not.
func (p *Profile) Inward(i int, c uint32) (loc int32, next uint32, ok bool) {
	start := p.keyOff[i]
	if c <= start {
		return 0, c, false
	}
	b := p.data
	if p.keyExtra[i] {
		b = p.extra
	}
	j := c - 1
	for j > start && b[j-1] >= 0x80 {
		j--
	}
	id, _ := uvarint(b[j:c]) // checked by finish
	loc, _ = p.locIndex.index(id)
	return loc, j, true
}

// Depth is stack i's number of locations.
func (p *Profile) Depth(i int) int {
	n := 0
	for _, c := range p.key(int32(i)) {
		if c < 0x80 {
			n++
		}
	}
	return n
}

func (p *Profile) key(s int32) []byte {
	if p.keyExtra[s] {
		return p.extra[p.keyOff[s]:p.keyEnd[s]]
	}
	return p.data[p.keyOff[s]:p.keyEnd[s]]
}

// Value is the sum of stack i's samples' values of sample type t.
func (p *Profile) Value(i, t int) int64 { return p.vals[i*p.nt+t] }

// NumLocations is the number of locations.
func (p *Profile) NumLocations() int { return len(p.lineOff) - 1 }

// Lines are location l's functions (indexes), innermost first.
func (p *Profile) Lines(l int32) []int32 { return p.lineFn[p.lineOff[l]:p.lineOff[l+1]] }

// Line is the line number of location l's line j.
func (p *Profile) Line(l int32, j int) int64 {
	i := int(p.lineOff[l]) + j
	if p.lineNo64 != nil {
		return p.lineNo64[i]
	}
	return int64(p.lineNo[i])
}

// Address is the address of location l when it has no line, else 0.
func (p *Profile) Address(l int32) uint64 { return p.addr[l] }

// addLine adds a line to the last location.
func (p *Profile) addLine(fn int32, line int64) {
	p.lineFn = append(p.lineFn, fn)
	switch {
	case p.lineNo64 != nil:
		p.lineNo64 = append(p.lineNo64, line)
	case line != int64(int32(line)):
		p.lineNo64 = make([]int64, len(p.lineNo), cap(p.lineNo))
		for i, n := range p.lineNo {
			p.lineNo64[i] = int64(n)
		}
		p.lineNo = nil
		p.lineNo64 = append(p.lineNo64, line)
	default:
		p.lineNo = append(p.lineNo, int32(line))
	}
}

// endLocation ends a location begun after the last one.
func (p *Profile) endLocation(addr uint64) {
	l := int32(len(p.lineOff) - 1)
	p.lineOff = append(p.lineOff, int32(len(p.lineFn)))
	if p.lineOff[l] == p.lineOff[l+1] {
		if p.addr == nil {
			p.addr = map[int32]uint64{}
		}
		p.addr[l] = addr
	}
}

// NumFuncs is the number of functions.
func (p *Profile) NumFuncs() int { return len(p.fnName) }

// FuncName is function f's name.
func (p *Profile) FuncName(f int32) string { return p.str(p.fnName[f]) }

func (p *Profile) str(i int64) string {
	s := p.strs[i]
	return string(p.data[s.off:s.end])
}

// TypeIndex is the index of the sample type called name, or -1.
func (p *Profile) TypeIndex(name string) int {
	for i, t := range p.Types {
		if t.Type == name {
			return i
		}
	}
	return -1
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Decode reads an uncompressed encoded profile. The profile keeps data:
// the caller must not change it.
func Decode(data []byte) (*Profile, error) {
	if int64(len(data)) > math.MaxUint32 {
		return nil, malformed("%d bytes: a profile of 4 GiB or more", len(data))
	}
	d := &decoder{p: &Profile{data: data, lineOff: []int32{0}}, nv: -1}
	d.presize(data)
	d.table.seed = maphash.MakeSeed()
	if err := d.top(data, nil); err != nil {
		return nil, err
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return d.p, nil
}

// decoder holds what the pass keeps until the tables are known.
type decoder struct {
	p        *Profile
	types    [][2]int64
	deflt    int64
	comments []int64
	strIdx   []int64 // other string indexes to check: pprof refuses one out of range

	nv     int // values per sample, -1 before the first
	table  stackTable
	scrLoc []byte
	scrVal []int64

	locIDs   []uint64
	bigFn    map[int]uint64 // line -> function id, for ids past an int32
	fnIDs    []uint64
	mapIDs   []uint64
	posTotal []int64
	negTotal []int64 // the negative values' sum, to see it pass -2^63
}

// top reads the profile's fields; with a stream, as its bytes arrive.
func (d *decoder) top(b []byte, st *stream) error {
	for off := 0; ; {
		end := len(b)
		if st != nil {
			end = st.fieldEnd(b, off)
		}
		if off >= end {
			return nil
		}
		num, typ, v, x, rest, err := field(b[off:end])
		if err != nil {
			return err
		}
		off = end - len(rest)
		switch num {
		case 1:
			err = d.valueType(typ, v)
		case 2:
			err = d.sample(typ, v)
		case 3:
			err = d.mapping(typ, v)
		case 4:
			err = d.location(typ, v)
		case 5:
			err = d.function(typ, v)
		case 6:
			if typ != bytesType {
				return malformed("string_table is not bytes")
			}
			at := cap(d.p.data) - cap(v)
			if len(d.p.strs) == 0 && len(v) != 0 {
				return malformed("string_table[0] must be ''")
			}
			d.p.strs = append(d.p.strs, span{at, at + len(v)})
		case 7, 8, 15: // drop_frames, keep_frames, doc_url
			err = d.varints(typ, v, x, func(u uint64) { d.strIdx = append(d.strIdx, int64(u)) })
		case 11:
			var pt [2]int64
			err = d.valueTypeInto(typ, v, &pt)
			d.strIdx = append(d.strIdx, pt[0], pt[1])
		case 13:
			err = d.varints(typ, v, x, func(u uint64) { d.comments = append(d.comments, int64(u)) })
		case 14:
			err = d.varints(typ, v, x, func(u uint64) { d.deflt = int64(u) })
		}
		if err != nil {
			return err
		}
	}
}

// Wire types.
const (
	varintType  = 0
	fixed64Type = 1
	bytesType   = 2
	fixed32Type = 5
)

// field reads one field: its number, wire type, bytes (length-delimited)
// or value (varint, fixed), and what follows it.
func field(b []byte) (num int, typ int, v []byte, x uint64, rest []byte, err error) {
	tag, n := uvarint(b)
	if n <= 0 {
		return 0, 0, nil, 0, nil, malformed("bad varint")
	}
	b = b[n:]
	num, typ = int(tag>>3), int(tag&7)
	switch typ {
	case varintType:
		if x, n = uvarint(b); n <= 0 {
			return 0, 0, nil, 0, nil, malformed("bad varint")
		}
		return num, typ, nil, x, b[n:], nil
	case fixed64Type:
		if len(b) < 8 {
			return 0, 0, nil, 0, nil, malformed("not enough data")
		}
		for i := 7; i >= 0; i-- {
			x = x<<8 | uint64(b[i])
		}
		return num, typ, nil, x, b[8:], nil
	case bytesType:
		l, n := uvarint(b)
		if n <= 0 {
			return 0, 0, nil, 0, nil, malformed("bad varint")
		}
		b = b[n:]
		if l > uint64(len(b)) {
			return 0, 0, nil, 0, nil, malformed("too much data")
		}
		return num, typ, b[:l], 0, b[l:], nil
	case fixed32Type:
		if len(b) < 4 {
			return 0, 0, nil, 0, nil, malformed("not enough data")
		}
		x = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24
		return num, typ, nil, x, b[4:], nil
	}
	return 0, 0, nil, 0, nil, malformed("unknown wire type: %d", typ)
}

// uvarint reads a varint of at most 10 bytes; n <= 0 when there is none.
func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	var x uint64
	for i := 0; i < 10 && i < len(b); i++ {
		x |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// varints calls f with each value of a repeated integer field, packed or
// not.
func (d *decoder) varints(typ int, v []byte, x uint64, f func(uint64)) error {
	switch typ {
	case varintType, fixed64Type, fixed32Type:
		f(x)
		return nil
	case bytesType:
		for len(v) > 0 {
			u, n := uvarint(v)
			if n <= 0 {
				return malformed("bad varint")
			}
			f(u)
			v = v[n:]
		}
		return nil
	}
	return malformed("bad field type %d", typ)
}

// message calls f with each field of an embedded message.
func message(typ int, b []byte, f func(num, typ int, v []byte, x uint64) error) error {
	if typ != bytesType {
		return malformed("a message is not bytes")
	}
	for len(b) > 0 {
		num, typ, v, x, rest, err := field(b)
		if err != nil {
			return err
		}
		b = rest
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) valueType(typ int, v []byte) error {
	var vt [2]int64
	err := d.valueTypeInto(typ, v, &vt)
	d.types = append(d.types, vt)
	return err
}

func (d *decoder) valueTypeInto(typ int, v []byte, vt *[2]int64) error {
	return message(typ, v, func(num, typ int, _ []byte, x uint64) error {
		if num == 1 || num == 2 {
			if typ != varintType {
				return malformed("a value type's string is not a varint")
			}
			vt[num-1] = int64(x)
		}
		return nil
	})
}

func (d *decoder) mapping(typ int, v []byte) error {
	var id uint64
	err := message(typ, v, func(num, typ int, _ []byte, x uint64) error {
		switch num {
		case 1:
			id = x
		case 5, 6: // filename, build_id
			d.strIdx = append(d.strIdx, int64(x))
		}
		return nil
	})
	d.mapIDs = append(d.mapIDs, id)
	return err
}

func (d *decoder) function(typ int, v []byte) error {
	var id uint64
	var name int64
	err := message(typ, v, func(num, typ int, _ []byte, x uint64) error {
		switch num {
		case 1:
			id = x
		case 2:
			name = int64(x)
		case 3, 4:
			d.strIdx = append(d.strIdx, int64(x))
		}
		return nil
	})
	d.fnIDs = append(d.fnIDs, id)
	d.p.fnName = append(d.p.fnName, name)
	return err
}

func (d *decoder) location(typ int, v []byte) error {
	p := d.p
	var id, addr uint64
	err := message(typ, v, func(num, typ int, v []byte, x uint64) error {
		switch num {
		case 1:
			id = x
		case 3:
			addr = x
		case 4:
			var fn uint64
			var ln int64
			err := message(typ, v, func(num, _ int, _ []byte, x uint64) error {
				switch num {
				case 1:
					fn = x
				case 2:
					ln = int64(x)
				}
				return nil
			})
			// The function's id for now (finish makes it an index);
			// one past an int32 waits in bigFn.
			if fn > math.MaxInt32 {
				if d.bigFn == nil {
					d.bigFn = map[int]uint64{}
				}
				d.bigFn[len(p.lineFn)] = fn
				fn = 0
			}
			p.addLine(int32(fn), ln)
			return err
		}
		return nil
	})
	d.locIDs = append(d.locIDs, id)
	p.endLocation(addr)
	return err
}

// sample interns a sample's stack by its encoded location ids and adds
// its values to the stack's.
func (d *decoder) sample(typ int, v []byte) error {
	if typ != bytesType {
		return malformed("a message is not bytes")
	}
	var key []byte
	packed, unpacked := false, false
	d.scrVal = d.scrVal[:0]
	d.scrLoc = d.scrLoc[:0]
	// A loop of its own, not message's callback: a big profile has
	// millions of samples.
	var err error
	for b := v; len(b) > 0 && err == nil; {
		num, typ, v, x, rest, ferr := field(b)
		if ferr != nil {
			return ferr
		}
		b = rest
		switch {
		case num == 1 && typ == bytesType && !packed && !unpacked:
			key, packed = v, true
		case num == 1:
			if packed { // a second run of ids: make one key of both
				d.scrLoc = append(d.scrLoc[:0], key...)
				packed = false
			}
			unpacked = true
			err = d.varints(typ, v, x, func(u uint64) { d.scrLoc = appendUvarint(d.scrLoc, u) })
		case num == 2 && typ == bytesType:
			for len(v) > 0 {
				u, n := uvarint(v)
				if n <= 0 {
					return malformed("bad varint")
				}
				d.scrVal = append(d.scrVal, int64(u))
				v = v[n:]
			}
		case num == 2:
			err = d.varints(typ, v, x, func(u uint64) { d.scrVal = append(d.scrVal, int64(u)) })
		}
	}
	if err != nil {
		return err
	}
	if d.nv < 0 {
		d.nv = len(d.scrVal)
		d.p.nt = d.nv
		d.p.Negative = make([]bool, d.nv)
		d.p.Overflow = make([]bool, d.nv)
		d.posTotal, d.negTotal = make([]int64, d.nv), make([]int64, d.nv)
	} else if len(d.scrVal) != d.nv {
		return malformed("mismatch: a sample has %d values, another %d", len(d.scrVal), d.nv)
	}
	d.p.Samples++
	var s int32
	if unpacked {
		s = d.intern(d.scrLoc, false)
	} else {
		s = d.intern(key, true)
	}
	vals := d.p.vals[int(s)*d.nv:]
	for i, x := range d.scrVal {
		vals[i] += x
		switch {
		case x < 0 && x < math.MinInt64-d.negTotal[i]:
			d.p.Negative[i], d.p.Overflow[i] = true, true
			d.negTotal[i] = math.MinInt64
		case x < 0:
			d.p.Negative[i] = true
			d.negTotal[i] += x
		case x > math.MaxInt64-d.posTotal[i]:
			d.p.Overflow[i] = true
			d.posTotal[i] = math.MaxInt64
		default:
			d.posTotal[i] += x
		}
	}
	return nil
}

func appendUvarint(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// stackTable is an open-addressing hash table of stacks keyed by their
// encoded location ids: each slot holds a key's 32-bit hash (high half)
// and its stack number + 1, so that most misses compare no bytes and the
// table grows without hashing a key again.
type stackTable struct {
	seed        maphash.Seed
	slots       []uint64
	tries, hits int
	off         bool // interning stopped
}

// intern returns the stack of the encoded ids key (a span of data when
// inData), adding one when it is new.
//
// Interning pays when samples share stacks. When the first samples
// hardly do (fewer than 1 in 32 of the first 65536: a profile of
// distinct addresses), it stops: each sample is then a stack of its own,
// which changes no sum, only the cost.
func (d *decoder) intern(key []byte, inData bool) int32 {
	t, p := &d.table, d.p
	if !t.off {
		if t.tries++; t.tries == 1<<16 && t.hits*32 < t.tries {
			t.off, t.slots = true, nil
		}
	}
	if !t.off {
		if len(p.keyOff)*2 >= len(t.slots) {
			t.grow()
		}
		h := uint32(maphash.Bytes(t.seed, key))
		mask := uint32(len(t.slots) - 1)
		for i := h & mask; ; i = (i + 1) & mask {
			s := t.slots[i]
			if s == 0 {
				t.slots[i] = uint64(h)<<32 | uint64(len(p.keyOff)+1)
				break
			}
			if uint32(s>>32) == h && string(p.key(int32(s)-1)) == string(key) {
				t.hits++
				return int32(s) - 1
			}
		}
	}
	if inData {
		off := cap(p.data) - cap(key)
		p.keyOff, p.keyEnd = append(p.keyOff, uint32(off)), append(p.keyEnd, uint32(off+len(key)))
	} else {
		p.keyOff, p.keyEnd = append(p.keyOff, uint32(len(p.extra))), append(p.keyEnd, uint32(len(p.extra)+len(key)))
		p.extra = append(p.extra, key...)
	}
	p.keyExtra = append(p.keyExtra, !inData)
	for i := 0; i < d.nv; i++ {
		p.vals = append(p.vals, 0)
	}
	return int32(len(p.keyOff) - 1)
}

func (t *stackTable) grow() {
	n := 1 << 12
	if len(t.slots) > 0 {
		n = 2 * len(t.slots)
	}
	old := t.slots
	t.slots = make([]uint64, n)
	mask := uint32(n - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := uint32(s>>32) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
