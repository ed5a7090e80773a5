package elfsym

import (
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"slices"
)

// Inlines expands an address of a Go executable into the functions the
// compiler inlined there, from its DWARF (debug/gosym does not: it names
// inlined code by the function it was inlined into). It reads link
// addresses: a position-independent executable's run-time addresses less
// their load bias.
type Inlines struct {
	subs []subprogram // sorted by lo, not overlapping
}

// Frame is one function at an address: the innermost first, then each
// function it was inlined into; File and Line are where the frame called
// the one before it (empty for the innermost, whose line is the
// address's own).
type Frame struct {
	Func string
	File string
	Line int64
}

type subprogram struct {
	lo, hi  uint64
	ranges  [][2]uint64
	origin  dwarf.Offset // the abstract function, when the entry has no name
	name    string
	inlined []inlined
}

type inlined struct {
	ranges   [][2]uint64
	depth    int // 0 for code inlined into the function itself
	origin   dwarf.Offset
	name     string
	callFile string
	callLine int64
}

// OpenInlines reads path's DWARF.
func OpenInlines(path string) (*Inlines, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		// Its run-time addresses are not its link addresses.
		return nil, fmt.Errorf("%s: not a position-dependent executable (%s)", path, f.Type)
	}
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	names := map[dwarf.Offset]string{}
	var subs []subprogram
	r := d.Reader()
	var files []*dwarf.LineFile
	// The open entries' tags, outermost first: where an entry sits.
	var open []dwarf.Tag
	cur := -1 // the subprogram being read, an index of subs
	for {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: DWARF: %w", path, err)
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
			if !slices.Contains(open, dwarf.TagSubprogram) {
				cur = -1
			}
			continue
		}
		if name, ok := e.Val(dwarf.AttrName).(string); ok {
			names[e.Offset] = name
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			files = nil
			if lr, err := d.LineReader(e); err == nil && lr != nil {
				files = lr.Files()
			}
		case dwarf.TagSubprogram:
			rs, err := d.Ranges(e)
			if err == nil && len(rs) > 0 {
				s := subprogram{ranges: rs, lo: rs[0][0], hi: rs[0][1]}
				for _, x := range rs {
					s.lo, s.hi = min(s.lo, x[0]), max(s.hi, x[1])
				}
				s.name, _ = e.Val(dwarf.AttrName).(string)
				s.origin, _ = e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
				subs = append(subs, s)
				cur = len(subs) - 1
			}
		case dwarf.TagInlinedSubroutine:
			if cur < 0 {
				break
			}
			rs, err := d.Ranges(e)
			if err != nil || len(rs) == 0 {
				break
			}
			depth := 0
			for _, t := range open {
				if t == dwarf.TagInlinedSubroutine {
					depth++
				}
			}
			in := inlined{ranges: rs, depth: depth}
			in.origin, _ = e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
			if i, ok := e.Val(dwarf.AttrCallFile).(int64); ok && i >= 0 && int(i) < len(files) && files[i] != nil {
				in.callFile = files[i].Name
			}
			in.callLine, _ = e.Val(dwarf.AttrCallLine).(int64)
			subs[cur].inlined = append(subs[cur].inlined, in)
		}
		if e.Children {
			open = append(open, e.Tag)
		}
	}
	for i := range subs {
		if subs[i].name == "" {
			subs[i].name = names[subs[i].origin]
		}
		for j := range subs[i].inlined {
			subs[i].inlined[j].name = names[subs[i].inlined[j].origin]
		}
	}
	slices.SortFunc(subs, func(a, b subprogram) int { return cmp.Compare(a.lo, b.lo) })
	return &Inlines{subs: subs}, nil
}

// Frames are the functions at addr, innermost first; nil when no
// function's DWARF holds it.
func (t *Inlines) Frames(addr uint64) []Frame {
	i, _ := slices.BinarySearchFunc(t.subs, addr, func(s subprogram, a uint64) int {
		if s.hi <= a {
			return -1
		}
		if s.lo > a {
			return 1
		}
		return 0
	})
	if i >= len(t.subs) || !inRanges(t.subs[i].ranges, addr) {
		return nil
	}
	s := t.subs[i]
	var chain []inlined
	for _, in := range s.inlined {
		if inRanges(in.ranges, addr) {
			chain = append(chain, in)
		}
	}
	slices.SortStableFunc(chain, func(a, b inlined) int { return cmp.Compare(a.depth, b.depth) })
	// chain is outermost first: each was called from the one before it
	// (the function itself for the first), at its call file and line.
	frames := make([]Frame, 0, len(chain)+1)
	for k := len(chain) - 1; k >= 0; k-- {
		f := Frame{Func: chain[k].name}
		if k+1 < len(chain) {
			f.File, f.Line = chain[k+1].callFile, chain[k+1].callLine
		}
		frames = append(frames, f)
	}
	f := Frame{Func: s.name}
	if len(chain) > 0 {
		f.File, f.Line = chain[0].callFile, chain[0].callLine
	}
	return append(frames, f)
}

func inRanges(rs [][2]uint64, a uint64) bool {
	return slices.ContainsFunc(rs, func(r [2]uint64) bool { return a >= r[0] && a < r[1] })
}

// Entry reports whether addr is a function's first instruction: where a
// call enters it.
func (t *Inlines) Entry(addr uint64) bool {
	i, ok := slices.BinarySearchFunc(t.subs, addr, func(s subprogram, a uint64) int { return cmp.Compare(s.lo, a) })
	return ok && t.subs[i].ranges[0][0] == addr
}
