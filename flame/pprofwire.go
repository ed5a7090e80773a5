package flame

import (
	"errors"
	"fmt"
	"math"
	"slices"
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
	wp.names = map[uint64][]int32{}
	if err := wp.samples(data, si, bld, opt, before); err != nil {
		return err
	}
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

// samples is the second pass: each sample's value si added to the tree
// along its frames, root first (the locations are known by now).
func (wp *wireProfile) samples(b []byte, si int, bld *builder, opt Options, before bool) error {
	var stack []int32
	return wp.eachSample(b, si, func(locs []uint64, v int64) error {
		stack = stack[:0]
		for i := len(locs) - 1; i >= 0; i-- {
			fr, err := wp.frames(bld, locs[i], opt)
			if err != nil {
				return err
			}
			stack = append(stack, fr...)
		}
		return bld.add(stack, v, before)
	})
}

// frames is a location's interned frames, outermost first.
func (wp *wireProfile) frames(bld *builder, id uint64, opt Options) ([]int32, error) {
	if fr, ok := wp.names[id]; ok {
		return fr, nil
	}
	li, ok := wp.locs[id]
	if !ok {
		return nil, fmt.Errorf("corrupt profile: a sample names location %d, which the profile does not have", id)
	}
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
	return fr, nil
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

// stackSet is every sample's frames, back to back, root first.
type stackSet struct {
	frames []int32
	off    []int32 // sample i's frames are frames[off[i]:off[i+1]]
	vals   []int64
}

func (ss *stackSet) stack(i int32) []int32 { return ss.frames[ss.off[i]:ss.off[i+1]] }

// readWireTree reads an encoded profile into the tree a graph shows, for
// one profile (not a differential): the samples' stacks are kept back to
// back (4 bytes a frame), sorted, and the frames holding at least
// 1/20000 of the total are made from the runs of equal prefixes. No
// frame below that is ever made: a profile whose stacks are all
// different (a long CPU profile of a big server) costs its frames, not a
// tree node for each.
func readWireTree(t *Tree, data []byte, opt Options) (*Node, error) {
	wp := &wireProfile{funcs: map[uint64]int64{}, locs: map[uint64]int32{}, names: map[uint64][]int32{}}
	if err := wp.meta(data); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotWire, err)
	}
	si, err := wp.sampleIndex(t, opt)
	if err != nil {
		return nil, err
	}
	names := newBuilder(false) // its names only
	ss := &stackSet{off: []int32{0}}
	var total int64
	err = wp.eachSample(data, si, func(locs []uint64, v int64) error {
		if v > math.MaxInt64-total {
			return errOverflow
		}
		total += v
		for i := len(locs) - 1; i >= 0; i-- {
			fr, err := wp.frames(names, locs[i], opt)
			if err != nil {
				return err
			}
			ss.frames = append(ss.frames, fr...)
		}
		if d := len(ss.frames) - int(ss.off[len(ss.off)-1]); d > opt.maxDepth() {
			return depthError(d, opt.maxDepth())
		}
		ss.off = append(ss.off, int32(len(ss.frames)))
		ss.vals = append(ss.vals, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if total == 0 {
		return nil, fmt.Errorf("every value is zero: %w", ErrEmpty)
	}
	perm := make([]int32, len(ss.vals))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(a, b int32) int { return slices.Compare(ss.stack(a), ss.stack(b)) })
	root := &Node{Name: "all", Total: total}
	ss.build(root, perm, 0, total/20000, names.names)
	return root, nil
}

// build adds to parent the frames at depth of the samples perm, which
// share their first depth frames: one child per run of an equal frame,
// when it holds at least min.
func (ss *stackSet) build(parent *Node, perm []int32, depth int, min int64, names []string) {
	for lo := 0; lo < len(perm); {
		st := ss.stack(perm[lo])
		if len(st) <= depth {
			lo++ // the sample ends here: its value is parent's own
			continue
		}
		f := st[depth]
		hi, v := lo, int64(0)
		for ; hi < len(perm); hi++ {
			s := ss.stack(perm[hi])
			if len(s) <= depth || s[depth] != f {
				break
			}
			v += ss.vals[perm[hi]]
		}
		if v >= min && v > 0 {
			c := &Node{Name: names[f], Total: v}
			parent.kids = append(parent.kids, c)
			ss.build(c, perm[lo:hi], depth+1, min, names)
		}
		lo = hi
	}
}

// eachSample calls f with each sample's locations (leaf first) and its
// value si, skipping zero values; a negative one is errNegative.
func (wp *wireProfile) eachSample(b []byte, si int, f func(locs []uint64, v int64) error) error {
	var locs []uint64
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
		switch {
		case err != nil || val == 0:
			return err
		case val < 0:
			return errNegative
		}
		return f(locs, val)
	})
}
