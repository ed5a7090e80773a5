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
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/diff"
)

// Node is a frame in the merged call tree.
type Node struct {
	Name   string
	Total  int64 // after, for a differential tree
	Before int64 // differential trees only
	w      int64 // the value that sets the frame's width (Layout)
	kids   []*Node
	index  map[string]*Node // for nodes with many children
	sorted bool
}

func (n *Node) child(name string) *Node {
	if n.index != nil {
		if c := n.index[name]; c != nil {
			return c
		}
	} else {
		for _, c := range n.kids {
			if c.Name == name {
				return c
			}
		}
	}
	c := &Node{Name: name}
	n.kids = append(n.kids, c)
	n.sorted = false
	if n.index != nil {
		n.index[name] = c
	} else if len(n.kids) > 8 {
		n.index = make(map[string]*Node, len(n.kids))
		for _, k := range n.kids {
			n.index[k.Name] = k
		}
	}
	return c
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

// add adds a stack, root first.
func (t *Tree) add(stack []string, v int64, before bool) {
	n := t.Root
	if before {
		n.Before += v
	} else {
		n.Total += v
	}
	for _, f := range stack {
		n = n.child(f)
		if before {
			n.Before += v
		} else {
			n.Total += v
		}
	}
}

// ErrEmpty is returned for a profile or a folded file with no samples.
var ErrEmpty = errors.New("no samples")

// Options say how to read an input.
type Options struct {
	Sample string     // pprof sample type; default the profile's default, else the last
	Folds  diff.Folds // name folding; differential graphs use diff.DefaultFolds
}

// Read reads a pprof profile (gzipped or not) or folded stacks
// ("a;b;c 10" lines), telling them apart by their first bytes.
func Read(r io.Reader, opt Options) (*Tree, error) {
	t := &Tree{Root: &Node{Name: "all"}}
	if err := readInto(t, r, opt, false); err != nil {
		return nil, err
	}
	return t, nil
}

// ReadDiff reads two inputs into one differential tree, on diff's
// normalized keys so that a renumbered closure is one frame.
func ReadDiff(before, after io.Reader, opt Options) (*Tree, error) {
	if opt.Folds == (diff.Folds{}) {
		opt.Folds = diff.DefaultFolds
	}
	t := &Tree{Root: &Node{Name: "all"}, Diff: true}
	if err := readInto(t, before, opt, true); err != nil {
		return nil, fmt.Errorf("before: %w", err)
	}
	sample, unit, req := t.Sample, t.Unit, t.Requests
	if err := readInto(t, after, opt, false); err != nil {
		return nil, fmt.Errorf("after: %w", err)
	}
	if sample != t.Sample {
		return nil, fmt.Errorf("before is %s, after is %s: not the same sample type", sample, t.Sample)
	}
	if unit != t.Unit {
		return nil, fmt.Errorf("before is in %s, after in %s", unit, t.Unit)
	}
	t.BeforeRequests = req
	return t, nil
}

func readInto(t *Tree, r io.Reader, opt Options, before bool) error {
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
		return readProfile(t, b, opt, before)
	}
	return readFolded(t, br, opt, before)
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

func readProfile(t *Tree, b []byte, opt Options, before bool) error {
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
		if v, ok := strings.CutPrefix(c, diff.RequestsComment); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				t.Requests = n
			}
		}
	}
	if len(p.Sample) == 0 {
		return fmt.Errorf("the profile has %w", ErrEmpty)
	}
	names := map[uint64][]string{} // location -> frames, outermost first
	var stack []string
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
						name = diff.FuncKey(fn.Name, opt.Folds)
					}
					fr = append(fr, name)
				}
				if len(loc.Line) == 0 {
					fr = []string{fmt.Sprintf("0x%x", loc.Address)}
				}
				names[loc.ID] = fr
			}
			stack = append(stack, fr...)
		}
		t.add(stack, v, before)
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
func readFolded(t *Tree, br *bufio.Reader, opt Options, before bool) error {
	t.Sample, t.Unit = "samples", "count"
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n, lines := 0, 0
	var stack []string
	intern := map[string]string{}
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
		for _, f := range bytes.Split(line[:sp], []byte{';'}) {
			if len(f) == 0 {
				return &FoldedError{n, truncate(string(line))}
			}
			name, ok := intern[string(f)]
			if !ok {
				name = diff.FuncKey(string(f), opt.Folds)
				intern[string(f)] = name
			}
			stack = append(stack, name)
		}
		t.add(stack, v, before)
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
