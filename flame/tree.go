// Package flame draws flame graphs from pprof profiles or folded stacks:
// an SVG that follows flamegraph.pl's conventions (a <g> per frame with a
// <title> and a <rect>, search and click-to-zoom), a single-file HTML page
// (zoom, search, an icicle view, a callers-and-callees "sandwich" view,
// tooltips with per-request values), and differential graphs in which
// removed frames stay visible. Output is deterministic.
package flame

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/profkey"
)

// Node is a frame in the merged call tree.
type Node struct {
	Name   string
	Total  int64 // after, for a differential tree
	Before int64 // differential trees only
	w      int64 // the value that sets the frame's width (Layout)
	kids   []*Node
	sorted bool
}

// Children returns the children sorted by name, as flamegraph.pl does.
func (n *Node) Children() []*Node {
	if !n.sorted {
		sort.Slice(n.kids, func(i, j int) bool { return n.kids[i].Name < n.kids[j].Name })
		n.sorted = true
	}
	return n.kids
}

// Tree is a call tree with the facts a graph shows about it.
type Tree struct {
	Root     *Node
	Sample   string // sample type, e.g. cpu or alloc_space
	Unit     string
	Requests int64 // perfspy.requests, 0 when unknown
	Diff     bool
	// BeforeRequests is the before side's perfspy.requests (differential).
	BeforeRequests int64
}

// builder holds the call tree while it is read, compactly: a few integers
// per frame and no pointers, so that inputs of millions of frames fit. The
// frames a graph can show are then made into Nodes.
type builder struct {
	names   []string
	nameIdx map[string]int32
	name    []int32
	total   []int64
	before  []int64
	first   []int32 // first child, -1 when none
	next    []int32 // next sibling, -1 when none
	nkids   []int32
	index   map[uint64]int32 // (parent, name) -> child, for parents with many children
	diff    bool             // keep before-values
}

func newBuilder(diff bool) *builder {
	b := &builder{nameIdx: map[string]int32{}, index: map[uint64]int32{}, diff: diff}
	b.newNode(b.intern("all"))
	return b
}

func (b *builder) intern(s string) int32 {
	if id, ok := b.nameIdx[s]; ok {
		return id
	}
	id := int32(len(b.names))
	b.nameIdx[s] = id
	b.names = append(b.names, s)
	return id
}

func (b *builder) newNode(name int32) int32 {
	id := int32(len(b.name))
	b.name = append(b.name, name)
	b.total = append(b.total, 0)
	if b.diff {
		b.before = append(b.before, 0)
	}
	b.first = append(b.first, -1)
	b.next = append(b.next, -1)
	b.nkids = append(b.nkids, 0)
	return id
}

// reserve sizes the arena for n frames at most, so that it does not grow
// by copies (and leave the old arrays to the collector).
func (b *builder) reserve(n int) {
	if n <= len(b.name) {
		return
	}
	grow := func(s []int32) []int32 { return append(make([]int32, 0, n), s...) }
	b.name, b.first, b.next, b.nkids = grow(b.name), grow(b.first), grow(b.next), grow(b.nkids)
	b.total = append(make([]int64, 0, n), b.total...)
}

// frameBound counts the frames of a folded file (semicolons and lines),
// an upper bound on the tree's nodes, and rewinds it; 0 for other inputs.
func frameBound(f *os.File) int {
	head := make([]byte, 2)
	if n, _ := f.ReadAt(head, 0); n < 2 || head[0] == 0x1f {
		return 0
	}
	buf := make([]byte, 1<<20)
	n := 1
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{';'}) + bytes.Count(buf[:k], []byte{'\n'})
		if err != nil {
			break
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0
	}
	return n + 1
}

const indexAbove = 16 // children searched linearly up to this many

func (b *builder) child(p, name int32) int32 {
	if b.nkids[p] > indexAbove {
		if c, ok := b.index[uint64(p)<<32|uint64(uint32(name))]; ok {
			return c
		}
	} else {
		for c := b.first[p]; c >= 0; c = b.next[c] {
			if b.name[c] == name {
				return c
			}
		}
	}
	c := b.newNode(name)
	b.next[c] = b.first[p]
	b.first[p] = c
	b.nkids[p]++
	switch {
	case b.nkids[p] == indexAbove+1:
		for k := b.first[p]; k >= 0; k = b.next[k] {
			b.index[uint64(p)<<32|uint64(uint32(b.name[k]))] = k
		}
	case b.nkids[p] > indexAbove+1:
		b.index[uint64(p)<<32|uint64(uint32(name))] = c
	}
	return c
}

// add adds a stack of interned names, root first.
func (b *builder) add(stack []int32, v int64, before bool) {
	n := int32(0)
	if before {
		b.before[n] += v
	} else {
		b.total[n] += v
	}
	for _, f := range stack {
		n = b.child(n, f)
		if before {
			b.before[n] += v
		} else {
			b.total[n] += v
		}
	}
}

// nodes makes the Nodes of the frames worth drawing: every frame of a
// differential tree, and in a plain one those holding at least 1/20000 of
// the total (no graph draws a narrower frame).
func (b *builder) nodes(diff bool) *Node {
	min := int64(0)
	if !diff {
		min = b.total[0] / 20000
	}
	var mk func(i int32) *Node
	mk = func(i int32) *Node {
		n := &Node{Name: b.names[b.name[i]], Total: b.total[i]}
		if diff {
			n.Before = b.before[i]
		}
		for c := b.first[i]; c >= 0; c = b.next[c] {
			if diff || b.total[c] >= min && b.total[c] > 0 {
				n.kids = append(n.kids, mk(c))
			}
		}
		return n
	}
	return mk(0)
}

// ErrEmpty is returned for a profile or a folded file with no samples.
var ErrEmpty = errors.New("no samples")

// Options say how to read an input.
type Options struct {
	Sample string        // pprof sample type; default the profile's default, else the last
	Folds  profkey.Folds // name folding; differential graphs use profkey.DefaultFolds
}

// Read reads a pprof profile (gzipped or not) or folded stacks
// ("a;b;c 10" lines), telling them apart by their first bytes.
func Read(r io.Reader, opt Options) (*Tree, error) {
	t := &Tree{}
	b := newBuilder(false)
	if f, ok := r.(*os.File); ok {
		b.reserve(frameBound(f))
	}
	if err := readInto(t, b, r, opt, false); err != nil {
		return nil, err
	}
	t.Root = b.nodes(false)
	return t, nil
}

// ReadDiff reads two inputs into one differential tree, on diff's
// normalized keys so that a renumbered closure is one frame.
func ReadDiff(before, after io.Reader, opt Options) (*Tree, error) {
	if opt.Folds == (profkey.Folds{}) {
		opt.Folds = profkey.DefaultFolds
	}
	t := &Tree{Diff: true}
	b := newBuilder(true)
	if err := readInto(t, b, before, opt, true); err != nil {
		return nil, fmt.Errorf("before: %w", err)
	}
	sample, unit, req := t.Sample, t.Unit, t.Requests
	if err := readInto(t, b, after, opt, false); err != nil {
		return nil, fmt.Errorf("after: %w", err)
	}
	t.Root = b.nodes(true)
	if sample != t.Sample {
		return nil, fmt.Errorf("before is %s, after is %s: not the same sample type", sample, t.Sample)
	}
	if unit != t.Unit {
		return nil, fmt.Errorf("before is in %s, after in %s", unit, t.Unit)
	}
	t.BeforeRequests = req
	return t, nil
}

func readInto(t *Tree, bld *builder, r io.Reader, opt Options, before bool) error {
	br := bufio.NewReaderSize(r, 1<<20)
	head, _ := br.Peek(2)
	if len(head) == 0 {
		return fmt.Errorf("empty input: %w", ErrEmpty)
	}
	if head[0] == 0x1f && head[1] == 0x8b || !looksLikeText(br) {
		b, err := io.ReadAll(br)
		if err != nil {
			return err
		}
		return readProfile(t, bld, b, opt, before)
	}
	return readFolded(t, bld, br, opt, before)
}

// looksLikeText peeks at the start of the input: folded stacks are text.
func looksLikeText(br *bufio.Reader) bool {
	b, _ := br.Peek(512)
	for _, c := range b {
		if c < 0x09 || (c > 0x0d && c < 0x20) {
			return false
		}
	}
	return true
}

func readProfile(t *Tree, bld *builder, b []byte, opt Options, before bool) error {
	p, err := profile.Parse(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a pprof profile or folded stacks: %w", err)
	}
	si := -1
	want := opt.Sample
	if want == "" {
		want = p.DefaultSampleType
	}
	for i, st := range p.SampleType {
		if st.Type == want {
			si = i
		}
	}
	if want == "" && len(p.SampleType) > 0 {
		si = len(p.SampleType) - 1
	}
	if si < 0 {
		var names []string
		for _, st := range p.SampleType {
			names = append(names, st.Type)
		}
		return fmt.Errorf("the profile has no sample type %q (it has %s)", want, strings.Join(names, ", "))
	}
	t.Sample, t.Unit = p.SampleType[si].Type, p.SampleType[si].Unit
	for _, c := range p.Comments {
		if v, ok := strings.CutPrefix(c, profkey.RequestsComment); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				t.Requests = n
			}
		}
	}
	if len(p.Sample) == 0 {
		return fmt.Errorf("the profile has %w", ErrEmpty)
	}
	names := map[uint64][]int32{} // location -> frames, outermost first
	var stack []int32
	for _, s := range p.Sample {
		v := s.Value[si]
		if v == 0 {
			continue
		}
		stack = stack[:0]
		for i := len(s.Location) - 1; i >= 0; i-- {
			loc := s.Location[i]
			fr, ok := names[loc.ID]
			if !ok {
				for j := len(loc.Line) - 1; j >= 0; j-- {
					name := "?"
					if fn := loc.Line[j].Function; fn != nil {
						name = profkey.FuncKey(fn.Name, opt.Folds)
					}
					fr = append(fr, bld.intern(name))
				}
				if len(loc.Line) == 0 {
					fr = []int32{bld.intern(fmt.Sprintf("0x%x", loc.Address))}
				}
				names[loc.ID] = fr
			}
			stack = append(stack, fr...)
		}
		bld.add(stack, v, before)
	}
	return nil
}

// FoldedError is a line of folded input that is not "frames count".
type FoldedError struct {
	Line int
	Text string
}

func (e *FoldedError) Error() string {
	return fmt.Sprintf("line %d: want \"frame;frame;... count\", got %q", e.Line, e.Text)
}

// readFolded streams folded stacks: one "a;b;c count" per line.
func readFolded(t *Tree, bld *builder, br *bufio.Reader, opt Options, before bool) error {
	t.Sample, t.Unit = "samples", "count"
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n, lines := 0, 0
	var stack []int32
	intern := map[string]int32{}
	for sc.Scan() {
		n++
		line := bytes.TrimRight(sc.Bytes(), " \t\r")
		if len(line) == 0 {
			continue
		}
		sp := bytes.LastIndexByte(line, ' ')
		if sp <= 0 {
			return &FoldedError{n, truncate(string(line))}
		}
		v, err := strconv.ParseInt(string(line[sp+1:]), 10, 64)
		if err != nil || v < 0 {
			return &FoldedError{n, truncate(string(line))}
		}
		stack = stack[:0]
		for rest := line[:sp]; ; {
			f := rest
			semi := bytes.IndexByte(rest, ';')
			if semi >= 0 {
				f, rest = rest[:semi], rest[semi+1:]
			}
			if len(f) == 0 {
				return &FoldedError{n, truncate(string(line))}
			}
			id, ok := intern[string(f)]
			if !ok {
				id = bld.intern(profkey.FuncKey(string(f), opt.Folds))
				intern[string(f)] = id
			}
			stack = append(stack, id)
			if semi < 0 {
				break
			}
		}
		bld.add(stack, v, before)
		lines++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	if lines == 0 {
		return fmt.Errorf("folded input has %w", ErrEmpty)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
