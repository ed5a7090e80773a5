package flame

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	goldenfile "github.com/perfspy/perfspy/internal/golden"
	"github.com/perfspy/perfspy/internal/synthprof"
)

var update = flag.Bool("update", false, "rewrite golden files")

func readFile(t *testing.T, name string) *Tree {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := Read(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"small.svg", func(b *bytes.Buffer) error {
			return WriteSVG(b, readFile(t, "small.folded"), SVGOptions{Title: "small"})
		}},
		{"small-icicle.svg", func(b *bytes.Buffer) error {
			return WriteSVG(b, readFile(t, "small.folded"), SVGOptions{Title: "small", Inverted: true})
		}},
		{"small.html", func(b *bytes.Buffer) error { return WriteHTML(b, readFile(t, "small.folded"), "small") }},
		{"diff.svg", func(b *bytes.Buffer) error { return WriteSVG(b, diffTree(t), SVGOptions{}) }},
		{"diff.html", func(b *bytes.Buffer) error { return WriteHTML(b, diffTree(t), "") }},
	} {
		var a, b bytes.Buffer
		if err := tc.write(&a); err != nil {
			t.Fatal(err)
		}
		tc.write(&b)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: two runs differ", tc.name)
		}
		goldenfile.Check(t, filepath.Join("testdata", "golden", tc.name), a.Bytes(), *update)
	}
}

func diffTree(t *testing.T) *Tree {
	t.Helper()
	b, _ := os.Open("testdata/before.folded")
	a, _ := os.Open("testdata/after.folded")
	defer b.Close()
	defer a.Close()
	tr, err := ReadDiff(b, a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The SVG keeps flamegraph.pl's shape: a <g> per frame, its <title>
// starting with the name, then the total and share; widths proportional.
func TestSVGShape(t *testing.T) {
	var b bytes.Buffer
	WriteSVG(&b, readFile(t, "small.folded"), SVGOptions{})
	s := b.String()
	for _, want := range []string{
		`<title>all (100 samples, 100.00%)</title><rect x="10.00" y=`,
		`width="1180.00"`,
		"function search(", "function zoom(",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	tr := readFile(t, "small.folded")
	if tr.Root.Total != 100 {
		t.Fatalf("root total %d, want 100", tr.Root.Total)
	}
	// main.handler under main.main: 30+10+25+15 = 80 of 100, so 80% of 1180 px.
	if !strings.Contains(s, `<title>main.handler (80 samples, 80.00%)</title><rect x="10.00" y="`) || !strings.Contains(s, `width="944.00"`) {
		t.Errorf("main.handler under main.main is not 80%% wide:\n%s", s)
	}
}

// Differential: widths from after, red for growth, blue for shrinkage,
// removed frames still drawn, renumbered closures one frame.
func TestDiff(t *testing.T) {
	tr := diffTree(t)
	var b bytes.Buffer
	WriteSVG(&b, tr, SVGOptions{})
	s := b.String()
	for _, want := range []string{
		`<g data-name="main.oldSite"><title>main.oldSite (after 0, before 20, -20 samples, -100.0%, removed)</title>`,
		`<g data-name="main.newSite"><title>main.newSite (after 30, before 0, +30 samples, new)</title>`,
		`<g data-name="main.handler.func*"><title>main.handler.func* (after 40, before 40, +0 samples, +0.0%)</title>`,
		`fill="rgb(90,120,255)"`, // removed
		`fill="rgb(255,55,55)"`,  // new: full red
	} {
		if !strings.Contains(s, want) {
			t.Errorf("differential SVG lacks %q", want)
		}
	}
	if strings.Contains(s, "func1") || strings.Contains(s, "func2") {
		t.Error("a renumbered closure shows as two frames")
	}
	// Widths: after's 90 plus the 20 of the removed frame.
	setWidths(tr.Root, true)
	if tr.Root.w != 110 || tr.Root.Total != 90 || tr.Root.Before != 100 {
		t.Errorf("root: width %d total %d before %d", tr.Root.w, tr.Root.Total, tr.Root.Before)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"a;b -3\n", "line 1"},
		{"no count\nat all\n", "line 1"},
		{"", "empty"},
		{"\n\n", "no samples"},
	} {
		_, err := Read(strings.NewReader(tc.in), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%q): %v, want %q", tc.in, err, tc.want)
		}
	}
	// As flamegraph.pl, lines that are not "stack count" are left out
	// and counted.
	for _, tc := range []struct {
		in   string
		line int
	}{{"x 1\ny\n", 2}, {"a;b 10\nthis line has no count\n", 2}, {"a;b 10\n\na;;b 5\n", 3}} {
		tr, err := Read(strings.NewReader(tc.in), Options{})
		if err != nil || tr.Ignored != 1 || tr.FirstIgnored.Line != tc.line {
			t.Errorf("Read(%q): %v, ignored %d", tc.in, err, tr.Ignored)
		}
	}
	var fe *FoldedError
	if _, err := Read(strings.NewReader("y\nz 1\n"), Options{}); !errors.As(err, &fe) || fe.Line != 1 {
		t.Errorf("FoldedError: %v", err)
	}
	p := synthprof.Synthetic(1, 10, []string{"alloc_objects/count", "alloc_space/bytes"})
	var pb bytes.Buffer
	p.Write(&pb)
	if _, err := Read(bytes.NewReader(pb.Bytes()), Options{Sample: "cpu"}); err == nil || !strings.Contains(err.Error(), `no sample type "cpu"`) {
		t.Errorf("missing sample type: %v", err)
	}
	p.Sample = nil
	pb.Reset()
	p.Write(&pb)
	if _, err := Read(bytes.NewReader(pb.Bytes()), Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty profile: %v", err)
	}
	if _, err := Read(bytes.NewReader([]byte{0x1f, 0x8b, 1, 2, 3}), Options{}); err == nil || !strings.Contains(err.Error(), "not a pprof profile") {
		t.Errorf("corrupt gzip: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad.folded"), []byte("a;b 1\nnope\n"), 0o644)
	var o, e bytes.Buffer
	if code := Command([]string{filepath.Join(dir, "bad.folded")}, &o, &e); code != 0 || !strings.Contains(e.String(), "bad.folded: ignored 1 lines") || !strings.Contains(e.String(), "line 2") {
		t.Errorf("command on a bad line: exit %d, %q", code, e.String())
	}
	os.WriteFile(filepath.Join(dir, "bad.folded"), []byte("nope\n"), 0o644)
	e.Reset()
	if code := Command([]string{filepath.Join(dir, "bad.folded")}, &o, &e); code != 1 || !strings.Contains(e.String(), "bad.folded: line 1") {
		t.Errorf("command on bad input: exit %d, %q", code, e.String())
	}
	for _, args := range [][]string{{}, {"-diff", "x"}, {"-o", "x.png", "y"}, {"-bogus"}} {
		if code := Command(args, &o, &e); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// A pprof profile's graph holds every sample's value at the root.
func TestPprofInput(t *testing.T) {
	p := synthprof.Synthetic(3, 500, []string{"samples/count", "cpu/nanoseconds"})
	p.Comments = []string{"perfspy.requests=100"}
	var pb bytes.Buffer
	p.Write(&pb)
	tr, err := Read(bytes.NewReader(pb.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, s := range p.Sample {
		sum += s.Value[1]
	}
	if tr.Root.Total != sum || tr.Sample != "cpu" || tr.Requests != 100 {
		t.Errorf("root %d (want %d), sample %s, requests %d", tr.Root.Total, sum, tr.Sample, tr.Requests)
	}
	var h bytes.Buffer
	if err := WriteHTML(&h, tr, ""); err != nil || !strings.Contains(h.String(), `"req":100`) {
		t.Errorf("HTML: %v", err)
	}
	if strings.Contains(h.String(), "http://") || strings.Contains(h.String(), "https://") {
		t.Error("the page refers to the network")
	}
}

// FromProfile draws what Read draws from the profile encoded: the same
// tree, sample type and requests, a change (negative values) included.
func TestFromProfile(t *testing.T) {
	p := synthprof.Synthetic(3, 500, []string{"samples/count", "cpu/nanoseconds"})
	p.Comments = []string{"perfspy.requests=100"}
	change := p.Copy()
	for i, s := range change.Sample {
		if i%3 == 0 {
			s.Value[0], s.Value[1] = -s.Value[0], -s.Value[1]
		}
	}
	for name, p := range map[string]*profile.Profile{"profile": p, "change": change} {
		var pb bytes.Buffer
		if err := p.Write(&pb); err != nil {
			t.Fatal(err)
		}
		read, err := Read(bytes.NewReader(pb.Bytes()), Options{})
		if err != nil {
			t.Fatal(err)
		}
		from, err := FromProfile(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if read.Sample != from.Sample || read.Unit != from.Unit || read.Requests != from.Requests || read.Diff != from.Diff || read.Root.Total != from.Root.Total {
			t.Errorf("%s: Read %s %s %d diff=%v total %d; FromProfile %s %s %d diff=%v total %d", name,
				read.Sample, read.Unit, read.Requests, read.Diff, read.Root.Total, from.Sample, from.Unit, from.Requests, from.Diff, from.Root.Total)
		}
		if d := treeDiff(read.Root, from.Root); d != "" {
			t.Errorf("%s: Read and FromProfile differ: %s", name, d)
		}
	}
	if _, err := FromProfile(&profile.Profile{SampleType: []*profile.ValueType{{Type: "cpu", Unit: "nanoseconds"}}}, Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("no samples: err = %v, want ErrEmpty", err)
	}
}

func FuzzFolded(f *testing.F) {
	b, _ := os.ReadFile("testdata/small.folded")
	f.Add(b)
	f.Add([]byte("a;b 1\n;c 2\n"))
	f.Add([]byte("a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a;a 1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		// Small limits, so that the fuzzer reaches them.
		tr, err := Read(bytes.NewReader(in), Options{MaxBytes: 1 << 12, MaxDepth: 32})
		if err != nil {
			return
		}
		if d := depth(tr.Root); d > 33 {
			t.Fatalf("a tree %d deep past a limit of 32 frames", d)
		}
		var sum int64
		for _, c := range tr.Root.Children() {
			sum += c.Total
		}
		if sum != tr.Root.Total {
			t.Fatalf("children %d, root %d", sum, tr.Root.Total)
		}
		var w bytes.Buffer
		if err := WriteSVG(&w, tr, SVGOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

func depth(n *Node) int {
	d := 0
	for _, c := range n.Children() {
		d = max(d, depth(c))
	}
	return d + 1
}

// The folded reader that parses blocks on every core reads what the
// reader of one line at a time reads: the same tree, lines left out and
// errors.
func FuzzFoldedBlocks(f *testing.F) {
	b, _ := os.ReadFile("testdata/small.folded")
	f.Add(b, uint16(7))
	f.Add([]byte("a;b 1\n;c 2\nx 0.5\n# c\nbad\na;b;c 3\n"), uint16(3))
	f.Add([]byte("a_[k];b 1\na_[j];b 2\na;b 1e3\n"), uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, block uint16) {
		opt := Options{MaxDepth: 32}
		seq := &Tree{}
		b := newBuilder(false)
		b.maxDepth = opt.maxDepth()
		errSeq := readFolded(seq, b, bufio.NewReader(bytes.NewReader(in)), opt, false)
		par, errPar := readFoldedBlocks(bufio.NewReader(bytes.NewReader(in)), opt, 1+int(block)%64)
		if (errSeq == nil) != (errPar == nil) || errSeq != nil && errSeq.Error() != errPar.Error() {
			t.Fatalf("one line at a time: %v; in blocks: %v", errSeq, errPar)
		}
		if errSeq != nil {
			return
		}
		seq.Root = b.nodes(false)
		if seq.Ignored != par.Ignored || seq.Scale != par.Scale || fmt.Sprint(seq.FirstIgnored) != fmt.Sprint(par.FirstIgnored) {
			t.Fatalf("left out %d %v, scale %d; in blocks %d %v, scale %d", seq.Ignored, seq.FirstIgnored, seq.Scale, par.Ignored, par.FirstIgnored, par.Scale)
		}
		if d := treeDiff(seq.Root, par.Root); d != "" {
			t.Fatalf("one line at a time and in blocks differ: %s", d)
		}
	})
}

func FuzzWireTree(f *testing.F) {
	sh, _ := synthprof.ShapeNamed("deep")
	sh.Samples, sh.MinDepth, sh.MaxDepth = 5, 2, 5
	var b bytes.Buffer
	synthprof.NewGraph(1, 40).WriteProfile(&b, 1, sh, []string{"alloc_objects/count", "alloc_space/bytes"})
	zr, _ := gzip.NewReader(&b)
	raw, _ := io.ReadAll(zr)
	f.Add(raw)
	f.Fuzz(func(t *testing.T, in []byte) {
		checkWireTree(t, "input", in, "")
	})
}

// TestByteOrderMark: folded stacks saved with a UTF-8 byte-order mark
// (gzipped or not) read as without it: the first frame's name is its own.
func TestByteOrderMark(t *testing.T) {
	plain := []byte("main;work 3\nmain;idle 1\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(append([]byte("\xef\xbb\xbf"), plain...))
	zw.Close()
	for name, in := range map[string][]byte{"plain": append([]byte("\xef\xbb\xbf"), plain...), "gzipped": gz.Bytes()} {
		tr, err := Read(bytes.NewReader(in), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kids := tr.Root.Children()
		if len(kids) != 1 || kids[0].Name != "main" || kids[0].Total != 4 {
			t.Errorf("%s: the root's children %+v, want main (4)", name, kids)
		}
	}
}
