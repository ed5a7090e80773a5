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
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/profkey"
)

// Node is a frame in the merged call tree.
type Node struct {
	Name   string
	Annot  byte  // perf's annotation: 'k' kernel, 'j' JIT, 'i' inlined, 0 none
	Total  int64 // after, for a differential tree
	Before int64 // differential trees only
	w      int64 // the value that sets the frame's width (Layout)
	kids   []*Node
	sorted bool
}

// Children returns the children sorted by name, as flamegraph.pl does.
func (n *Node) Children() []*Node {
	if !n.sorted {
		// Two frames have one name when perf's annotations differ
		// (memcpy_[k], memcpy_[j]): the annotation orders them.
		sort.Slice(n.kids, func(i, j int) bool {
			a, b := n.kids[i], n.kids[j]
			return a.Name < b.Name || a.Name == b.Name && a.Annot < b.Annot
		})
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
	// Scale: values count 1/Scale units (1, or 1000 for folded stacks
	// with fractional counts); 0 means 1.
	Scale int64
	// Ignored counts the folded lines that were not "stack count" and
	// were left out, as flamegraph.pl leaves them; FirstIgnored is the
	// first.
	Ignored      int
	FirstIgnored *FoldedError
}

// builder holds the call tree while it is read, compactly: a few integers
// per frame and no pointers, so that inputs of millions of frames fit. The
// frames a graph can show are then made into Nodes.
type builder struct {
	names   []string
	nameIdx map[string]int32
	// The frames, column by column, in chunks that never move: the
	// arena grows without copies, and without garbage.
	name   col32
	total  col64
	before col64
	first  col32 // first child, -1 when none
	next   col32 // next sibling, -1 when none
	nkids  col32
	index  map[uint64]int32 // (parent, name) -> child, for parents with many children
	diff   bool             // keep before-values
	scale  int64            // values count 1/scale units (folded fractions)
	annot  map[int32]byte   // perf's annotation of a name: k, j or i
	// maxDepth bounds a stack's frames: the tree's walks recurse once
	// a frame.
	maxDepth int
}

func newBuilder(diff bool) *builder {
	b := &builder{nameIdx: map[string]int32{}, index: map[uint64]int32{}, diff: diff, scale: 1, maxDepth: limits.Depth}
	b.newNode(b.intern("all"))
	return b
}

func (b *builder) intern(s string) int32 { return b.internAs(s, s) }

// internAs interns a frame under key, drawn as name.
func (b *builder) internAs(key, name string) int32 {
	if id, ok := b.nameIdx[key]; ok {
		return id
	}
	id := int32(len(b.names))
	b.nameIdx[key] = id
	b.names = append(b.names, name)
	return id
}

func (b *builder) newNode(name int32) int32 {
	id := int32(b.name.n)
	b.name.push(name)
	b.total.push(0)
	if b.diff {
		b.before.push(0)
	}
	b.first.push(-1)
	b.next.push(-1)
	b.nkids.push(0)
	return id
}

// chunkBits sets the frames per chunk of a column: 32768, after a first
// chunk of 1<<firstBits (most graphs a results folder draws have a few
// hundred frames, and a column's first chunk at full size cost each a
// megabyte to clear).
const (
	chunkBits = 15
	firstBits = 8
)

// col is a column of the arena: chunks that never move.
type col[T int32 | int64] struct {
	c [][]T
	n int
}

type (
	col32 = col[int32]
	col64 = col[int64]
)

func (a *col[T]) push(v T) {
	if a.n == 0 {
		a.c = append(a.c[:0], make([]T, 1<<firstBits))
	} else if a.n >= 1<<firstBits && (a.n-1<<firstBits)&(1<<chunkBits-1) == 0 {
		a.c = append(a.c, make([]T, 1<<chunkBits))
	}
	*a.at(int32(a.n)) = v
	a.n++
}

func (a *col[T]) at(i int32) *T {
	if i < 1<<firstBits {
		return &a.c[0][i]
	}
	i -= 1 << firstBits
	return &a.c[1+i>>chunkBits][i&(1<<chunkBits-1)]
}

// scale multiplies every value by f.
func (a *col[T]) scale(f T) {
	for _, c := range a.c {
		for i := range c {
			c[i] *= f
		}
	}
}

const indexAbove = 16 // children searched linearly up to this many

func (b *builder) child(p, name int32) int32 {
	nk := b.nkids.at(p)
	if *nk > indexAbove {
		if c, ok := b.index[uint64(p)<<32|uint64(uint32(name))]; ok {
			return c
		}
	} else {
		for c := *b.first.at(p); c >= 0; c = *b.next.at(c) {
			if *b.name.at(c) == name {
				return c
			}
		}
	}
	c := b.newNode(name)
	nk = b.nkids.at(p) // the chunks may have grown, not moved
	*b.next.at(c) = *b.first.at(p)
	*b.first.at(p) = c
	*nk++
	switch {
	case *nk == indexAbove+1:
		for k := *b.first.at(p); k >= 0; k = *b.next.at(k) {
			b.index[uint64(p)<<32|uint64(uint32(*b.name.at(k)))] = k
		}
	case *nk > indexAbove+1:
		b.index[uint64(p)<<32|uint64(uint32(name))] = c
	}
	return c
}

// errOverflow is a sum past what an int64 holds.
var errOverflow = errors.New("the values add up to more than 2^63: they overflow")

// add adds a stack of interned names, root first.
func (b *builder) add(stack []int32, v int64, before bool) error {
	if len(stack) > b.maxDepth {
		return depthError(len(stack), b.maxDepth)
	}
	col := &b.total
	if before {
		col = &b.before
	}
	n := int32(0)
	root := col.at(0)
	if v > math.MaxInt64-*root {
		return errOverflow
	}
	*root += v
	for _, f := range stack {
		n = b.child(n, f)
		*col.at(n) += v
	}
	return nil
}

// checkTotal refuses a tree whose values are all zero: no graph to draw.
func (b *builder) checkTotal() error {
	if *b.total.at(0) == 0 && (!b.diff || *b.before.at(0) == 0) {
		return fmt.Errorf("every value is zero: %w", ErrEmpty)
	}
	return nil
}

// rescale makes every value count 1/f units.
func (b *builder) rescale(f int64) error {
	if *b.total.at(0) > math.MaxInt64/f || b.diff && *b.before.at(0) > math.MaxInt64/f {
		return errOverflow
	}
	b.total.scale(f)
	b.before.scale(f)
	b.scale *= f
	return nil
}

// annotate records perf's annotation of name id.
func (b *builder) annotate(id int32, k byte) {
	if b.annot == nil {
		b.annot = map[int32]byte{}
	}
	b.annot[id] = k
}

// nodes makes the Nodes of the frames worth drawing: every frame of a
// differential tree, and in a plain one those holding at least 1/20000 of
// the total (no graph draws a narrower frame).
func (b *builder) nodes(diff bool) *Node {
	min := int64(0)
	if !diff {
		min = *b.total.at(0) / 20000
	}
	var mk func(i int32) *Node
	mk = func(i int32) *Node {
		nm := *b.name.at(i)
		n := &Node{Name: b.names[nm], Total: *b.total.at(i), Annot: b.annot[nm]}
		if diff {
			n.Before = *b.before.at(i)
		}
		for c := *b.first.at(i); c >= 0; c = *b.next.at(c) {
			if v := *b.total.at(c); diff || v >= min && v > 0 {
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
	// MaxBytes bounds an input inflated (a gzipped input) or read whole
	// (a profile); 0 is limits.Profile.
	MaxBytes int64
	// MaxDepth bounds the frames of one stack; 0 is limits.Depth.
	MaxDepth int
	// Route keeps the samples of one route (the pprof label "route" that
	// probe run writes; profkey.SelectRoute); "" keeps all.
	Route  string
	access *storeaccess.Access // the store's, for pyroscope:// inputs
}

func (o Options) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return limits.Profile
	}
	return o.MaxBytes
}

func (o Options) maxDepth() int {
	if o.MaxDepth <= 0 {
		return limits.Depth
	}
	return min(o.MaxDepth, limits.MaxDepth)
}

// depthError is a stack deeper than the limit.
func depthError(n, limit int) error {
	return &limits.Error{What: "a stack", Size: int64(n), Limit: int64(limit), Unit: "frames", Flag: "-max-depth"}
}

// Read reads a pprof profile (gzipped or not), a legacy text profile
// (Go's debug=1 heap, mutex, goroutine and threadcreate profiles, the
// C++ and Java text formats that go tool pprof reads) or folded stacks
// ("a;b;c 10" lines, gzipped or not), telling them apart by their first
// bytes. Folded stacks with two counts per line (difffolded.pl's "stack
// before after") and profiles with negative values (a change, as
// allocdiff -o writes) make a differential tree.
func Read(r io.Reader, opt Options) (*Tree, error) {
	in, err := classify(r, opt)
	if err != nil {
		return nil, err
	}
	var data []byte
	if in.kind == inputProfile && !in.text {
		t, back, err := readWireTree(in, opt)
		if t != nil || err != nil {
			return t, err
		}
		data = back // for the general parser
	}
	if in.kind == inputFolded {
		return readFoldedTree(in.br, opt)
	}
	diff := in.kind == inputFolded2
	var p *profile.Profile
	switch {
	case data != nil:
		// A change, or a legacy binary profile: the general parser.
		if p, err = parseProfile(bytes.NewReader(data), opt); err != nil {
			return nil, err
		}
		diff = hasNegative(p)
	case in.kind == inputProfile:
		if p, err = parseInput(in, opt); err != nil {
			return nil, err
		}
		diff = hasNegative(p)
	}
	t := &Tree{Diff: diff}
	b := newBuilder(diff)
	b.maxDepth = opt.maxDepth()
	if diff && p != nil && opt.Folds == (profkey.Folds{}) {
		opt.Folds = profkey.DefaultFolds
	}
	if p != nil {
		err = profileInto(t, b, p, opt, false)
	} else {
		err = readFolded(t, b, in.br, opt, false)
	}
	if err != nil {
		return nil, err
	}
	t.Root = b.nodes(diff)
	return t, nil
}

// FromProfile is Read of a profile already parsed: what Read(r) gives
// when r holds p encoded, without encoding and parsing it again (a
// results folder draws a page for each profile it writes).
func FromProfile(p *profile.Profile, opt Options) (*Tree, error) {
	diff := hasNegative(p)
	t := &Tree{Diff: diff}
	b := newBuilder(diff)
	b.maxDepth = opt.maxDepth()
	if diff && opt.Folds == (profkey.Folds{}) {
		opt.Folds = profkey.DefaultFolds
	}
	if err := profileInto(t, b, p, opt, false); err != nil {
		return nil, err
	}
	t.Root = b.nodes(diff)
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
	b.maxDepth = opt.maxDepth()
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

// Kinds of input.
const (
	inputProfile = iota // pprof, protobuf or legacy text
	inputFolded         // "stack count"
	inputFolded2        // "stack before after": difffolded.pl's
)

// input is an input told apart by its first bytes, decompressed.
type input struct {
	br   *bufio.Reader
	kind int
	gzip bool
	// first is, for text, its first data line, which is not folded when
	// the text is taken for a legacy profile.
	first *FoldedError
	text  bool
	// size is what the input says it holds, read whole (a file's size,
	// a gzip stream's inflated size); 0 when unknown.
	size int64
}

// classify opens r: gunzipped when it is gzip, then a protobuf profile
// (binary), folded stacks (text whose first line ends in one or two
// counts) or a legacy text profile (any other text).
func classify(r io.Reader, opt Options) (*input, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(2)
	if len(head) == 0 {
		if err != nil && err != io.EOF {
			return nil, err // a folder, an unreadable file
		}
		return nil, fmt.Errorf("empty input: %w", ErrEmpty)
	}
	in := &input{br: br}
	var f *os.File
	if f, _ = r.(*os.File); f != nil {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			in.size = st.Size()
		}
	}
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		if in.size > 0 {
			in.size = limits.GzipSize(f, in.size)
		}
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("not a pprof profile nor gzipped folded stacks: gzip: %w", err)
		}
		lim := &limits.Reader{R: gz, N: opt.maxBytes(), Limit: opt.maxBytes(), What: "input inflated", Flag: "-max-profile-size"}
		in.br, in.gzip = bufio.NewReaderSize(lim, 1<<20), true
		if head, err = in.br.Peek(1); len(head) == 0 {
			if err == io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("gzip stream cut short (a truncated file?): %w", err)
			}
			if err != nil && err != io.EOF {
				return nil, fmt.Errorf("gzip: %w", err)
			}
			return nil, fmt.Errorf("empty input: %w", ErrEmpty)
		}
	}
	// A byte-order mark (editors on Windows write one) is no part of the
	// first frame's name.
	if bom, _ := in.br.Peek(3); bytes.Equal(bom, []byte("\xef\xbb\xbf")) {
		in.br.Discard(3)
	}
	if !looksLikeText(in.br) {
		return in, nil
	}
	in.kind, in.text = inputProfile, true
	if line, n, ok := firstDataLine(in.br); ok {
		switch k := countFields(line); {
		case line == nil:
			// A first line longer than can be peeked: no legacy
			// profile has one; the folded reader takes it whole.
			in.kind = inputFolded
		case legacyHeader(line):
			// "threadcreate profile: total 7" ends in a number too.
		case k == 1:
			in.kind = inputFolded
		case k == 2:
			in.kind = inputFolded2
		default:
			in.first = &FoldedError{n, truncate(string(line))}
		}
	} else {
		in.kind = inputFolded // comments or blank lines only: said empty below
	}
	return in, nil
}

// legacyHeaders start the legacy text profiles that go tool pprof reads.
var legacyHeaders = []string{"heap profile:", "heap_v2/", "threadcreate profile:", "goroutine profile:", "--- ", "%"}

func legacyHeader(line []byte) bool {
	for _, h := range legacyHeaders {
		if bytes.HasPrefix(line, []byte(h)) {
			return true
		}
	}
	return false
}

// firstDataLine is the first line that is not blank or a # comment,
// within what can be peeked.
// A line that does not end within it is nil, with ok.
func firstDataLine(br *bufio.Reader) ([]byte, int, bool) {
	b, _ := br.Peek(1 << 20)
	full := len(b) == 1<<20
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else if full {
			return nil, n, true
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, " \t\r")
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		return line, n, true
	}
	return nil, 0, false
}

// countFields tells how many counts end a folded line: 1 ("stack n"),
// 2 ("stack before after"), 0 when it is not folded.
func countFields(line []byte) int {
	rest, _, ok := cutCount(line)
	if !ok || len(rest) == 0 {
		return 0
	}
	if r2, _, ok := cutCount(rest); ok && len(r2) > 0 {
		return 2
	}
	return 1
}

// cutCount splits the last space- or tab-separated field off a line when
// it is a count (an integer or a decimal fraction, not negative).
func cutCount(line []byte) (rest []byte, v float64, ok bool) {
	line = bytes.TrimRight(line, " \t\r")
	sp := bytes.LastIndexAny(line, " \t")
	if sp <= 0 {
		return nil, 0, false
	}
	f := line[sp+1:]
	v, err := strconv.ParseFloat(string(f), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || bytes.ContainsAny(f, "eEnNiIxX_+") {
		return nil, 0, false
	}
	return bytes.TrimRight(line[:sp], " \t"), v, true
}

func readInto(t *Tree, bld *builder, r io.Reader, opt Options, before bool) error {
	in, err := classify(r, opt)
	if err != nil {
		return err
	}
	switch in.kind {
	case inputProfile:
		if !in.text {
			p, si, data, err := decodeInput(t, in, opt)
			switch {
			case errors.Is(err, errNegative):
				return errors.New("a profile with negative values is already a change (as allocdiff -o writes): draw it without -diff")
			case err == nil:
				return readWire(bld, p, si, opt, before)
			case !errors.Is(err, errNotWire):
				return err
			}
			pp, err := parseProfile(bytes.NewReader(data), opt)
			if err != nil {
				return err
			}
			return profileInto(t, bld, pp, opt, before)
		}
		p, err := parseInput(in, opt)
		if err != nil {
			return err
		}
		return profileInto(t, bld, p, opt, before)
	case inputFolded2:
		return errors.New("two counts per line (difffolded.pl's \"stack before after\"): already a difference; draw it without -diff")
	}
	return readFolded(t, bld, in.br, opt, before)
}

// looksLikeText peeks at the start: a protobuf profile holds a NUL (its
// string table starts with ""), text does not, and a few stray control
// bytes in a frame name do not make a folded file binary.
func looksLikeText(br *bufio.Reader) bool {
	b, _ := br.Peek(4096)
	ctl := 0
	for _, c := range b {
		switch {
		case c == 0:
			return false
		case c < 0x09 || (c > 0x0d && c < 0x20):
			ctl++
		}
	}
	return ctl*10 < len(b)
}

// parseProfile reads a protobuf or legacy text profile.
func parseProfile(r io.Reader, opt Options) (*profile.Profile, error) {
	b, err := limits.ReadAll(r, opt.maxBytes(), "input", "-max-profile-size")
	if err != nil {
		return nil, err
	}
	p, err := profile.ParseData(b)
	if err != nil {
		return nil, fmt.Errorf("not a pprof profile (protobuf or legacy text) nor folded stacks (\"frame;frame;... count\" lines): %w", err)
	}
	return p, nil
}

// parseInput parses a profile input; text that is no legacy profile
// either is said to be bad folded stacks, at its first line.
func parseInput(in *input, opt Options) (*profile.Profile, error) {
	p, err := parseProfile(in.br, opt)
	if err != nil && in.first != nil {
		return nil, fmt.Errorf("%w (nor a legacy text profile: %v)", in.first, errors.Unwrap(err))
	}
	return p, err
}

// hasNegative tells a profile of a change (negative values) from a
// profile.
func hasNegative(p *profile.Profile) bool {
	for _, s := range p.Sample {
		for _, v := range s.Value {
			if v < 0 {
				return true
			}
		}
	}
	return false
}

// profileInto adds a profile's samples of the chosen type. In a
// differential tree read from one profile (a change), negative values
// are the before side.
func profileInto(t *Tree, bld *builder, p *profile.Profile, opt Options, before bool) error {
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
	oneSided := bld.diff && !before && hasNegative(p)
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
						name = funcKey(fn.Name, opt.Folds)
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
		side := before
		if oneSided && v < 0 {
			v, side = -v, true
		}
		if err := bld.add(stack, v, side); err != nil {
			return err
		}
	}
	return bld.checkTotal()
}

// FoldedError is a line of folded input that is not "frames count".
type FoldedError struct {
	Line int
	Text string
}

func (e *FoldedError) Error() string {
	return fmt.Sprintf("line %d: want \"frame;frame;... count\", got %q", e.Line, e.Text)
}

// readFolded streams folded stacks, as flamegraph.pl reads them: one
// "a;b;c count" per line (a space or a tab before the count; a fraction
// is a count), "# ..." lines skipped; with two counts per line, before
// and after of a differential tree. perf's _[k], _[j] and _[i] suffixes
// come off the names and color the frames.
func readFolded(t *Tree, bld *builder, br *bufio.Reader, opt Options, before bool) error {
	t.Sample, t.Unit = "samples", "samples"
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<20), maxFoldedLine)
	fr := &foldedReader{t: t, bld: bld, opt: opt, intern: map[string]int32{}}
	n, lines := 0, 0
	for sc.Scan() {
		n++
		line := bytes.TrimRight(sc.Bytes(), " \t\r")
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if err := fr.line(line, before); err != nil {
			if !errors.Is(err, errBadLine) {
				return fmt.Errorf("line %d: %w", n, err)
			}
			// As flamegraph.pl: a line that is not "stack count" is
			// left out, and counted.
			if t.Ignored == 0 {
				t.FirstIgnored = &FoldedError{n, truncate(string(line))}
			}
			t.Ignored++
			continue
		}
		lines++
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			err = fmt.Errorf("a line over %d bytes: %w", maxFoldedLine, err)
		}
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	if lines == 0 && t.FirstIgnored != nil {
		return t.FirstIgnored
	}
	if lines == 0 {
		return fmt.Errorf("folded input has %w", ErrEmpty)
	}
	t.Scale = bld.scale
	return bld.checkTotal()
}

var errBadLine = errors.New("not a folded line")

// maxFoldedLine is the longest folded line read.
const maxFoldedLine = 64 << 20

// foldedReader adds folded lines to a builder.
type foldedReader struct {
	t      *Tree
	bld    *builder
	opt    Options
	intern map[string]int32
	stack  []int32
}

// line adds one folded line.
func (fr *foldedReader) line(line []byte, before bool) error {
	rest, v, ok := cutCount(line)
	if !ok {
		return errBadLine
	}
	// A differential file read alone: "stack before after".
	if fr.t.Diff && fr.bld.diff && !before {
		if stack, vb, ok := cutCount(rest); ok && len(stack) > 0 {
			if err := fr.frames(stack); err != nil {
				return err
			}
			if err := fr.addCount(vb, true); err != nil {
				return err
			}
			return fr.addCount(v, false)
		}
	}
	if err := fr.frames(rest); err != nil {
		return err
	}
	return fr.addCount(v, before)
}

// frames interns a line's frames into fr.stack.
func (fr *foldedReader) frames(rest []byte) error {
	fr.stack = fr.stack[:0]
	for {
		f := rest
		semi := bytes.IndexByte(rest, ';')
		if semi >= 0 {
			f, rest = rest[:semi], rest[semi+1:]
		}
		if len(f) == 0 {
			return errBadLine
		}
		id, ok := fr.intern[string(f)]
		if !ok {
			name, annot := perfAnnotation(string(f))
			key := funcKey(name, fr.opt.Folds)
			if annot == 0 {
				id = fr.bld.intern(key)
			} else {
				// memcpy_[k] and memcpy_[j] stay two frames, both
				// named memcpy, as flamegraph.pl draws them.
				id = fr.bld.internAs(key+"_["+string(annot)+"]", key)
				fr.bld.annotate(id, annot)
			}
			fr.intern[string(f)] = id
		}
		fr.stack = append(fr.stack, id)
		if len(fr.stack) > fr.bld.maxDepth {
			return depthError(len(fr.stack)+bytes.Count(rest, []byte{';'})+1, fr.bld.maxDepth)
		}
		if semi < 0 {
			return nil
		}
	}
}

// addCount adds v, a whole count or a fraction: the first fraction makes
// every value count thousandths (Tree.Scale).
func (fr *foldedReader) addCount(v float64, before bool) error {
	if v != math.Trunc(v) && fr.bld.scale == 1 {
		if err := fr.bld.rescale(1000); err != nil {
			return err
		}
	}
	scaled := math.Round(v * float64(fr.bld.scale))
	if scaled >= math.MaxInt64/2 {
		return errOverflow
	}
	return fr.bld.add(fr.stack, int64(scaled), before)
}

// perfAnnotation takes perf's _[k] (kernel), _[j] (JIT) and _[i]
// (inlined) suffixes off a frame name.
func perfAnnotation(name string) (string, byte) {
	if len(name) > 4 && strings.HasSuffix(name, "]") && name[len(name)-4] == '_' && name[len(name)-3] == '[' {
		switch k := name[len(name)-2]; k {
		case 'k', 'j', 'i':
			return name[:len(name)-4], k
		}
	}
	return name, 0
}

// funcKey folds a Go function name as profkey does; any other name (a C
// or C++ symbol, perf's [unknown] or [libc.so.6], a Java frame with
// arguments) is left as it is.
func funcKey(name string, f profkey.Folds) string {
	name = sanitizeName(name)
	if f == (profkey.Folds{}) || !looksGo(name) {
		return name
	}
	return profkey.FuncKey(name, f)
}

// looksGo tells a Go function name (path/pkg.Func, pkg.(*T).M) from
// others.
func looksGo(name string) bool {
	if name == "" || name[0] == '[' || strings.ContainsAny(name, " \t<>:@") || !strings.Contains(name, ".") {
		return false
	}
	return true
}

// sanitizeName makes a frame name safe on a page and in a terminal:
// control characters, bidirectional overrides, invisible characters and
// invalid UTF-8 are written as escapes (\x1b, \u202e), so that
// main.rtl\u202Egnp.exe does not read as ...exe.png.
func sanitizeName(s string) string { return safetext.Text(s) }

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
