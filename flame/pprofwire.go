package flame

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/perfspy/perfspy/profkey"
)

// errNegative makes the streaming reader hand a profile of a change
// (negative values) to the general parser, and errNotWire a binary input
// that is no protobuf profile (the legacy binary CPU profile of
// gperftools and Go before 1.9, which the general parser reads).
var (
	errNegative = errors.New("negative values")
	errNotWire  = errors.New("not a protobuf profile")
)

// wireProfile is what the first pass over an encoded profile keeps:
// everything but the samples, as offsets into the encoded bytes.
type wireProfile struct {
	strs        [][]byte
	types       [][2]int64 // sample types: type and unit, as string indexes
	defaultType int64
	comments    []int64
	funcs       map[uint64]int64   // function id -> name, as a string index
	locs        map[uint64]int32   // location id -> index into locLines
	locLines    [][]uint64         // function ids, innermost first (pprof's order)
	locAddr     []uint64           // the location's address, for one without lines
	names       map[uint64][]int32 // location id -> interned frames, outermost first
}

// readWire reads an encoded (uncompressed) profile straight into bld, in
// two passes over its bytes and without a Go object per sample or
// location: the samples make a call tree of location ids, which then
// becomes the tree of function names. It returns errNegative for a
// profile with negative values (a change).
func readWire(t *Tree, bld *builder, data []byte, opt Options, before bool) error {
	wp := &wireProfile{funcs: map[uint64]int64{}, locs: map[uint64]int32{}}
	if err := wp.meta(data); err != nil {
		return fmt.Errorf("%w: %v", errNotWire, err)
	}
	si, err := wp.sampleIndex(t, opt)
	if err != nil {
		return err
	}
	lt := newBuilder(false) // the call tree of location indexes
	if err := wp.samples(data, si, lt); err != nil {
		return err
	}
	if lt.total[0] == 0 {
		return fmt.Errorf("the profile has %w", ErrEmpty)
	}
	wp.names = map[uint64][]int32{}
	ids := make([]uint64, len(wp.locLines))
	for id, i := range wp.locs {
		ids[i] = id
	}
	root := int32(0)
	add := func(n int32, v int64) {
		if before {
			bld.before[n] += v
		} else {
			bld.total[n] += v
		}
	}
	if v := lt.total[0]; v > 0 {
		add(root, v)
	}
	var walk func(ln, bn int32)
	walk = func(ln, bn int32) {
		for c := lt.first[ln]; c >= 0; c = lt.next[c] {
			n := bn
			for _, f := range wp.frames(bld, ids[lt.name[c]], opt) {
				n = bld.child(n, f)
				add(n, lt.total[c])
			}
			walk(c, n)
		}
	}
	walk(0, root)
	return bld.checkTotal()
}

// meta is the first pass: sample types, strings, functions, locations,
// comments.
func (wp *wireProfile) meta(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			var vt [2]int64
			err := eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if n == 1 || n == 2 {
					vt[n-1] = int64(x)
				}
				return nil
			})
			wp.types = append(wp.types, vt)
			return err
		case num == 4 && typ == protowire.BytesType:
			return wp.location(v)
		case num == 5 && typ == protowire.BytesType:
			var id uint64
			var name int64
			err := eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				switch n {
				case 1:
					id = x
				case 2:
					name = int64(x)
				}
				return nil
			})
			wp.funcs[id] = name
			return err
		case num == 6 && typ == protowire.BytesType:
			wp.strs = append(wp.strs, v)
		case num == 13:
			return eachVarint(typ, v, x, func(x uint64) { wp.comments = append(wp.comments, int64(x)) })
		case num == 14 && typ == protowire.VarintType:
			wp.defaultType = int64(x)
		}
		return nil
	})
}

// location reads one Location: its id, address and lines' functions.
func (wp *wireProfile) location(b []byte) error {
	var id, addr uint64
	var lines []uint64
	err := eachField(b, func(n protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case n == 1:
			id = x
		case n == 3:
			addr = x
		case n == 4 && typ == protowire.BytesType:
			var fn uint64
			err := eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if n == 1 {
					fn = x
				}
				return nil
			})
			lines = append(lines, fn)
			return err
		}
		return nil
	})
	wp.locs[id] = int32(len(wp.locLines))
	wp.locLines = append(wp.locLines, lines)
	wp.locAddr = append(wp.locAddr, addr)
	return err
}

func (wp *wireProfile) str(i int64) (string, error) {
	if i < 0 || i >= int64(len(wp.strs)) {
		return "", fmt.Errorf("corrupt profile: string %d of %d", i, len(wp.strs))
	}
	return string(wp.strs[i]), nil
}

// sampleIndex picks the sample type, as profileInto does, and fills the
// tree's type, unit and request count.
func (wp *wireProfile) sampleIndex(t *Tree, opt Options) (int, error) {
	want := opt.Sample
	if want == "" && wp.defaultType != 0 {
		want, _ = wp.str(wp.defaultType)
	}
	si := -1
	var names []string
	for i, vt := range wp.types {
		name, err := wp.str(vt[0])
		if err != nil {
			return 0, err
		}
		names = append(names, name)
		if name == want {
			si = i
		}
	}
	if want == "" && len(wp.types) > 0 {
		si = len(wp.types) - 1
	}
	if si < 0 {
		if len(wp.types) == 0 {
			return 0, fmt.Errorf("%w: no sample types", errNotWire)
		}
		return 0, fmt.Errorf("the profile has no sample type %q (it has %s)", want, strings.Join(names, ", "))
	}
	t.Sample, _ = wp.str(wp.types[si][0])
	t.Unit, _ = wp.str(wp.types[si][1])
	for _, c := range wp.comments {
		s, _ := wp.str(c)
		if v, ok := strings.CutPrefix(s, profkey.RequestsComment); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				t.Requests = n
			}
		}
	}
	return si, nil
}

// samples is the second pass: each sample's value si added to the call
// tree of location indexes, root first.
func (wp *wireProfile) samples(b []byte, si int, lt *builder) error {
	var locs []uint64
	var stack []int32
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 2 || typ != protowire.BytesType {
			return nil
		}
		locs = locs[:0]
		var val int64
		vi := 0
		err := eachField(v, func(n protowire.Number, typ protowire.Type, v []byte, x uint64) error {
			switch n {
			case 1:
				return eachVarint(typ, v, x, func(x uint64) { locs = append(locs, x) })
			case 2:
				return eachVarint(typ, v, x, func(x uint64) {
					if vi == si {
						val = int64(x)
					}
					vi++
				})
			}
			return nil
		})
		if err != nil || val == 0 {
			return err
		}
		if val < 0 {
			return errNegative
		}
		stack = stack[:0]
		for i := len(locs) - 1; i >= 0; i-- {
			li, ok := wp.locs[locs[i]]
			if !ok {
				return fmt.Errorf("corrupt profile: a sample names location %d, which the profile does not have", locs[i])
			}
			stack = append(stack, li)
		}
		return lt.add(stack, val, false)
	})
}

// frames is a location's interned frames, outermost first.
func (wp *wireProfile) frames(bld *builder, id uint64, opt Options) []int32 {
	if fr, ok := wp.names[id]; ok {
		return fr
	}
	li := wp.locs[id]
	lines := wp.locLines[li]
	var fr []int32
	for j := len(lines) - 1; j >= 0; j-- {
		name := "?"
		if ni, ok := wp.funcs[lines[j]]; ok {
			if s, err := wp.str(ni); err == nil {
				name = funcKey(s, opt.Folds)
			}
		}
		fr = append(fr, bld.intern(name))
	}
	if len(lines) == 0 {
		fr = []int32{bld.intern(fmt.Sprintf("0x%x", wp.locAddr[li]))}
	}
	wp.names[id] = fr
	return fr
}

// eachField calls f for each field of the message b: its number, type,
// bytes (for a length-delimited field) and value (for a varint or
// fixed one).
func eachField(b []byte, f func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// eachVarint calls f for each value of a repeated varint field, packed
// (one length-delimited field) or not (one varint).
func eachVarint(typ protowire.Type, v []byte, x uint64, f func(uint64)) error {
	if typ == protowire.VarintType {
		f(x)
		return nil
	}
	if typ != protowire.BytesType {
		return nil
	}
	for len(v) > 0 {
		y, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		f(y)
		v = v[n:]
	}
	return nil
}
