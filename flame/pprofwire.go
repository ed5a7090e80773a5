package flame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/profwire"
	"github.com/perfspy/perfspy/profkey"
)

// errNegative makes the streaming reader hand a profile of a change
// (negative values) to the general parser, and errNotWire a binary input
// that is no protobuf profile (the legacy binary CPU profile of
// gperftools and Go before 1.9, which the general parser reads, or a
// profile it refuses, with its reason).
var (
	errNegative = errors.New("negative values")
	errNotWire  = errors.New("not a protobuf profile")
)

// decodeInput decodes a binary input as it is read (inflated, on
// another core). It returns the input's bytes too, for the general
// parser: with errNotWire when the decoder refuses it (a legacy binary
// profile, or none: the parser says why), with errNegative for a profile
// with negative values (a change). Other errors are the input's (its
// size limit, its gzip stream) or final.
func decodeInput(t *Tree, in *input, opt Options) (*profwire.Profile, int, []byte, error) {
	var r io.Reader = in.br
	if !in.gzip { // an inflated input is bounded as it inflates
		r = &limits.Reader{R: in.br, N: opt.maxBytes(), Limit: opt.maxBytes(), What: "input", Flag: "-max-profile-size"}
	}
	p, data, err := profwire.DecodeStream(r, in.size)
	if errors.Is(err, profwire.ErrMalformed) {
		return nil, 0, data, fmt.Errorf("%w: %v", errNotWire, err)
	}
	if err != nil {
		return nil, 0, nil, err
	}
	si, err := sampleIndex(t, p, opt)
	switch {
	case err != nil:
		return nil, 0, data, err
	case p.Negative[si]:
		return nil, 0, data, errNegative
	case p.Overflow[si]:
		return nil, 0, nil, errOverflow
	}
	return p, si, data, nil
}

// readWire adds a decoded profile's values of type si to bld, one
// distinct stack at a time.
func readWire(bld *builder, p *profwire.Profile, si int, opt Options, before bool) error {
	fr := newFramer(p, bld, opt)
	var stack, locs []int32
	for s := 0; s < p.NumStacks(); s++ {
		v := p.Value(s, si)
		if v == 0 {
			continue
		}
		stack, locs = fr.stack(stack[:0], locs, s)
		if err := bld.add(stack, v, before); err != nil {
			return err
		}
	}
	return bld.checkTotal()
}

// sampleIndex picks the sample type, as profileInto does, and fills the
// tree's type, unit and request count.
func sampleIndex(t *Tree, p *profwire.Profile, opt Options) (int, error) {
	want := opt.Sample
	if want == "" {
		want = p.DefaultType
	}
	si := -1
	var names []string
	for i, vt := range p.Types {
		names = append(names, vt.Type)
		if vt.Type == want {
			si = i
		}
	}
	if want == "" && len(p.Types) > 0 {
		si = len(p.Types) - 1
	}
	if si < 0 {
		if len(p.Types) == 0 {
			return 0, fmt.Errorf("%w: no sample types", errNotWire)
		}
		return 0, fmt.Errorf("the profile has no sample type %q (it has %s)", want, strings.Join(names, ", "))
	}
	t.Sample, t.Unit = p.Types[si].Type, p.Types[si].Unit
	for _, c := range p.Comments {
		if v, ok := strings.CutPrefix(c, profkey.RequestsComment); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				t.Requests = n
			}
		}
	}
	return si, nil
}

// framer turns a decoded profile's locations into interned frames, each
// location and function once.
type framer struct {
	p      *profwire.Profile
	bld    *builder
	opt    Options
	fnName []int32 // function -> interned name + 1
	locOff []int32 // location -> its frames in frames, + 1
	locLen []int32
	frames []int32 // outermost first, per location
}

func newFramer(p *profwire.Profile, bld *builder, opt Options) *framer {
	return &framer{p: p, bld: bld, opt: opt, fnName: make([]int32, p.NumFuncs()), locOff: make([]int32, p.NumLocations()), locLen: make([]int32, p.NumLocations())}
}

// all makes every location's frames: the functions' names interned one
// at a time, then the locations' frames filled in on every core.
func (fr *framer) all() {
	p := fr.p
	for f := range fr.fnName {
		if fr.fnName[f] == 0 {
			fr.fnName[f] = fr.bld.intern(funcKey(p.FuncName(int32(f)), fr.opt.Folds)) + 1
		}
	}
	n := 0
	for l := range fr.locOff {
		k := max(len(p.Lines(int32(l))), 1) // one without lines is its address
		fr.locOff[l], fr.locLen[l] = int32(n+1), int32(k)
		n += k
	}
	fr.frames = make([]int32, n)
	for l := range fr.locOff {
		if len(p.Lines(int32(l))) == 0 {
			fr.frames[fr.locOff[l]-1] = fr.bld.intern(fmt.Sprintf("0x%x", p.Address(int32(l))))
		}
	}
	nw := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := 0; w < nw; w++ {
		lo, hi := len(fr.locOff)*w/nw, len(fr.locOff)*(w+1)/nw
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := lo; l < hi; l++ {
				fns, at := p.Lines(int32(l)), int(fr.locOff[l]-1)
				for j := range fns {
					fr.frames[at+j] = fr.fnName[fns[len(fns)-1-j]] - 1
				}
			}
		}()
	}
	wg.Wait()
}

// location is location l's frames, outermost first.
func (fr *framer) location(l int32) []int32 {
	if o := fr.locOff[l]; o != 0 {
		return fr.frames[o-1 : o-1+fr.locLen[l]]
	}
	start := len(fr.frames)
	fns := fr.p.Lines(l)
	for j := len(fns) - 1; j >= 0; j-- {
		f := fns[j]
		if fr.fnName[f] == 0 {
			fr.fnName[f] = fr.bld.intern(funcKey(fr.p.FuncName(f), fr.opt.Folds)) + 1
		}
		fr.frames = append(fr.frames, fr.fnName[f]-1)
	}
	if len(fns) == 0 {
		fr.frames = append(fr.frames, fr.bld.intern(fmt.Sprintf("0x%x", fr.p.Address(l))))
	}
	fr.locOff[l], fr.locLen[l] = int32(start+1), int32(len(fr.frames)-start)
	return fr.frames[start:]
}

// stack appends stack s's frames, root first, to st; locs is scratch.
func (fr *framer) stack(st, locs []int32, s int) ([]int32, []int32) {
	locs = fr.p.Stack(s, locs[:0])
	for i := len(locs) - 1; i >= 0; i-- {
		st = append(st, fr.location(locs[i])...)
	}
	return st, locs
}

// stackSet is stacks' frames, back to back, root first, each an
// interned name as a varint: the first names interned are the roots' and
// the hot paths', of a byte or two.
type stackSet struct {
	frames []byte
	off    []int32 // stack i's frames are frames[off[i]:off[i+1]]
	vals   []int64
	pos    []int32 // where stack i's next frame starts
}

// readWireTree reads a binary input into the tree a graph shows, for
// one profile (not a differential): only the frames holding at least
// 1/20000 of the total are made, top down, walking each distinct stack
// from its root in the input's own bytes. No frame below that is ever
// made, nor an array of every stack's frames: a profile whose stacks are
// all different (a long CPU profile of a big server) costs its bytes.
//
// It returns the input's bytes, and no tree, when the general parser is
// to read it (errNegative, errNotWire, as decodeInput).
func readWireTree(in *input, opt Options) (*Tree, []byte, error) {
	t := &Tree{}
	p, si, data, err := decodeInput(t, in, opt)
	if errors.Is(err, errNegative) || errors.Is(err, errNotWire) {
		return nil, data, nil
	}
	if err != nil {
		return nil, nil, err
	}
	names := newBuilder(false) // its names only
	var src frameSource
	var vals []int64
	if p.NumStacks() >= framesAbove {
		ss, err := wireStacks(p, si, names, opt)
		if err != nil {
			return nil, nil, err
		}
		src, vals = ss, ss.vals
	} else {
		if src, vals, err = newWireSource(p, si, names, opt); err != nil {
			return nil, nil, err
		}
	}
	var total int64
	for _, v := range vals {
		total += v
	}
	if total == 0 {
		return nil, nil, fmt.Errorf("every value is zero: %w", ErrEmpty)
	}
	t.Root = treeOf(src, vals, total, names)
	return t, nil, nil
}

// framesAbove is the number of distinct stacks from which a profile's
// frames are written out (wireStacks: a varint each, about the size of
// the input's location ids again) rather than walked in the input's
// bytes (wireSource): a walk reads the input at random, one location at
// a time, which is slow once the stacks are far bigger than the caches.
var framesAbove = 1 << 17

// frameSource gives the stacks' frames, root first, one at a time.
type frameSource interface {
	// next is stack i's next frame (an interned name), or -1 past its
	// leaf.
	next(i int32) int32
}

// treeOf makes the nodes of stacks (src's, with vals) whose values add
// up to total.
func treeOf(src frameSource, vals []int64, total int64, names *builder) *Node {
	idx := make([]int32, len(vals))
	for i := range idx {
		idx[i] = int32(i)
	}
	root := &Node{Name: "all", Total: total}
	sp := &spawner{sem: make(chan struct{}, runtime.GOMAXPROCS(0)-1), bigAt: max(len(idx)/16, spawnAt)}
	pt := &partitioner{src: src, vals: vals, min: total / 20000, names: names.names, annot: names.annot, tmp: make([]int32, len(idx)), cur: make([]int32, len(idx)), sp: sp}
	pt.scratch()
	pt.build(root, idx, 0)
	sp.wg.Wait()
	return root
}

// spawnAt is the fewest stacks a part has to be split on another core.
var spawnAt = 4096

// spawner lets a partitioner split a big part on another core: the
// parts are apart (their stacks, their nodes, their places in tmp and
// cur), and each core has sums of its own.
type spawner struct {
	sem   chan struct{} // a token per other core
	wg    sync.WaitGroup
	bigAt int // the stacks that make a part worth a core
}

func (pt *partitioner) scratch() {
	pt.sum, pt.bucket, pt.touched = make([]int64, len(pt.names)), make([]int32, len(pt.names)), nil
}

// wireSource walks a decoded profile's stacks from their roots, through
// their encoded location ids: a cursor in those, and the frames of the
// location under way (several when it has inlined calls).
type wireSource struct {
	p  *profwire.Profile
	fr *framer
	st []wireCursor
}

// wireCursor is where a stack's walk is: one struct, so that a step
// reads one cache line of it.
type wireCursor struct {
	stack int32 // the profile's stack
	at    uint32
	loc   int32 // -1 before the root
	inner int32 // the next of loc's frames
}

// newWireSource is the stacks of p with a value of type si, and those
// values; every frame's name is interned by its return, and a stack
// deeper than the limit is an error.
func newWireSource(p *profwire.Profile, si int, names *builder, opt Options) (*wireSource, []int64, error) {
	ws := &wireSource{p: p, fr: newFramer(p, names, opt)}
	var vals []int64
	var locs []int32
	for s := 0; s < p.NumStacks(); s++ {
		v := p.Value(s, si)
		if v == 0 {
			continue
		}
		locs = p.Stack(s, locs[:0])
		d := 0
		for _, l := range locs {
			d += len(ws.fr.location(l))
		}
		if d > opt.maxDepth() {
			return nil, nil, depthError(d, opt.maxDepth())
		}
		ws.st = append(ws.st, wireCursor{stack: int32(s), at: p.RootCursor(s), loc: -1})
		vals = append(vals, v)
	}
	return ws, vals, nil
}

func (ws *wireSource) next(i int32) int32 {
	c := &ws.st[i]
	for {
		if c.loc >= 0 && c.inner < ws.fr.locLen[c.loc] {
			f := ws.fr.frames[ws.fr.locOff[c.loc]-1+c.inner]
			c.inner++
			return f
		}
		l, at, ok := ws.p.Inward(int(c.stack), c.at)
		if !ok {
			return -1
		}
		c.at, c.loc, c.inner = at, l, 0
	}
}

// next is stack i's next frame from its varints.
func (ss *stackSet) next(i int32) int32 {
	at := ss.pos[i]
	if at == ss.off[i+1] {
		return -1
	}
	x, n := binary.Uvarint(ss.frames[at:])
	ss.pos[i] = at + int32(n)
	return int32(x)
}

// wireStacks is the frames of p's stacks with a value of type si,
// written out on every core: every location's frames first (names are
// interned one at a time), then a range of stacks a core.
func wireStacks(p *profwire.Profile, si int, names *builder, opt Options) (*stackSet, error) {
	fr := newFramer(p, names, opt)
	fr.all()
	nw := runtime.GOMAXPROCS(0)
	parts := make([]*stackSet, nw)
	errs := make([]error, nw)
	var wg sync.WaitGroup
	for w := range parts {
		lo, hi := p.NumStacks()*w/nw, p.NumStacks()*(w+1)/nw
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[w], errs[w] = fr.stacks(si, lo, hi, opt.maxDepth())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first stack's, as one pass would say
		}
	}
	size, n := 0, 0
	for _, ps := range parts {
		size, n = size+len(ps.frames), n+len(ps.vals)
	}
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("more than %d bytes of frames in all", math.MaxInt32)
	}
	ss := &stackSet{frames: make([]byte, 0, size), off: make([]int32, 1, n+1), vals: make([]int64, 0, n)}
	for _, ps := range parts {
		base := int32(len(ss.frames))
		ss.frames = append(ss.frames, ps.frames...)
		for _, o := range ps.off[1:] {
			ss.off = append(ss.off, base+o)
		}
		ss.vals = append(ss.vals, ps.vals...)
	}
	ss.pos = slices.Clone(ss.off[:len(ss.vals)])
	return ss, nil
}

// stacks writes out the frames of stacks lo to hi with a value of type
// si, in an array made for about their size: that of their encoded
// location ids and a quarter for inlined frames. Every location's frames
// are made by then: it only reads fr.
func (fr *framer) stacks(si, lo, hi, maxDepth int) (*stackSet, error) {
	p := fr.p
	ids := 0
	for s := lo; s < hi; s++ {
		ids += p.IDBytes(s)
	}
	ss := &stackSet{frames: make([]byte, 0, ids*5/4), off: make([]int32, 1, hi-lo+1), vals: make([]int64, 0, hi-lo)}
	var locs []int32
	for s := lo; s < hi; s++ {
		v := p.Value(s, si)
		if v == 0 {
			continue
		}
		locs = p.Stack(s, locs[:0])
		d := 0
		for i := len(locs) - 1; i >= 0; i-- {
			l := locs[i]
			for _, f := range fr.frames[fr.locOff[l]-1 : fr.locOff[l]-1+fr.locLen[l]] {
				ss.frames = binary.AppendUvarint(ss.frames, uint64(f))
			}
			d += int(fr.locLen[l])
		}
		if d > maxDepth {
			return nil, depthError(d, maxDepth)
		}
		if len(ss.frames) > math.MaxInt32 {
			return nil, fmt.Errorf("more than %d bytes of frames in all", math.MaxInt32)
		}
		ss.off = append(ss.off, int32(len(ss.frames)))
		ss.vals = append(ss.vals, v)
	}
	return ss, nil
}

// partitioner makes a tree's nodes top down: the stacks under a node are
// split by their frame at the next depth, and only the parts holding at
// least min become nodes and are split further. A stack is split once
// per depth, in order: pos is where its next frame starts.
type partitioner struct {
	src     frameSource
	vals    []int64
	min     int64
	names   []string
	annot   map[int32]byte
	sum     []int64 // per frame name, within one split; zero between
	bucket  []int32
	touched []int32
	tmp     []int32 // by place in the whole idx: build's are from base
	cur     []int32
	sp      *spawner
}

func (pt *partitioner) build(parent *Node, idx []int32, base int) {
	pt.touched = pt.touched[:0]
	cur := pt.cur[base : base+len(idx)] // each stack's frame at this depth
	tmp := pt.tmp[base : base+len(idx)]
	for j, i := range idx {
		f := pt.src.next(i)
		cur[j] = f
		if f < 0 {
			continue // the stack ends here: its value is parent's own
		}
		if pt.sum[f] == 0 {
			pt.touched = append(pt.touched, f)
		}
		pt.sum[f] += pt.vals[i]
	}
	type part struct {
		f      int32
		v      int64
		lo, hi int
	}
	var parts []part
	for _, f := range pt.touched {
		if v := pt.sum[f]; v >= pt.min && v > 0 {
			pt.bucket[f] = int32(len(parts) + 1)
			parts = append(parts, part{f: f, v: v})
		}
	}
	// Count, place each kept stack after the ones of the parts before
	// its own, and clear the scratch for the splits below.
	for j, f := range cur {
		if f >= 0 {
			b := pt.bucket[f]
			cur[j] = b - 1
			if b > 0 {
				parts[b-1].hi++
			}
		}
	}
	n := 0
	for k := range parts {
		parts[k].lo, n = n, n+parts[k].hi
		parts[k].hi = parts[k].lo
	}
	for j, b := range cur {
		if b >= 0 {
			tmp[parts[b].hi] = idx[j]
			parts[b].hi++
		}
	}
	copy(idx, tmp[:n])
	for _, f := range pt.touched {
		pt.sum[f], pt.bucket[f] = 0, 0
	}
	for _, k := range parts {
		c := &Node{Name: pt.names[k.f], Total: k.v, Annot: pt.annot[k.f]}
		parent.kids = append(parent.kids, c)
		if k.hi-k.lo >= pt.sp.bigAt && pt.spawn(c, idx[k.lo:k.hi], base+k.lo) {
			continue
		}
		pt.build(c, idx[k.lo:k.hi], base+k.lo)
	}
}

// spawn builds a part on another core when one is free.
func (pt *partitioner) spawn(c *Node, idx []int32, base int) bool {
	select {
	case pt.sp.sem <- struct{}{}:
	default:
		return false
	}
	other := *pt
	other.scratch()
	pt.sp.wg.Add(1)
	go func() {
		defer func() { <-pt.sp.sem; pt.sp.wg.Done() }()
		other.build(c, idx, base)
	}()
	return true
}
