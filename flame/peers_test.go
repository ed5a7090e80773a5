package flame

import (
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/synthprof"
)

// checkXML parses an SVG as XML: a browser refuses one that is not.
func checkXML(t *testing.T, svg []byte) {
	t.Helper()
	if !utf8.Valid(svg) {
		t.Fatal("SVG is not valid UTF-8")
	}
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
	}
}

func svgOf(t *testing.T, tr *Tree) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSVG(&b, tr, SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Legacy text profiles (Go's debug=1 heap, goroutine, threadcreate) are
// read as go tool pprof reads them: the same totals as profile.Parse.
func TestLegacyTextProfiles(t *testing.T) {
	for _, name := range []string{"heap", "goroutine", "threadcreate"} {
		var b bytes.Buffer
		if err := pprof.Lookup(name).WriteTo(&b, 1); err != nil {
			t.Fatal(err)
		}
		p, err := profile.ParseData(b.Bytes())
		if err != nil {
			t.Fatalf("%s: the oracle: %v", name, err)
		}
		tr, err := Read(bytes.NewReader(b.Bytes()), Options{})
		if errors.Is(err, ErrEmpty) {
			continue // a heap profile with nothing sampled yet
		}
		if err != nil {
			t.Fatalf("%s debug=1: %v", name, err)
		}
		si := len(p.SampleType) - 1
		if p.DefaultSampleType != "" {
			for i, st := range p.SampleType {
				if st.Type == p.DefaultSampleType {
					si = i
				}
			}
		}
		var want int64
		for _, s := range p.Sample {
			want += s.Value[si]
		}
		if tr.Root.Total != want {
			t.Errorf("%s debug=1: total %d, profile.Parse says %d", name, tr.Root.Total, want)
		}
	}
}

// Names cut to fit are cut between characters; invalid UTF-8, control
// bytes, bidirectional overrides and zero-width characters are written as
// escapes: the SVG stays well-formed XML, and a name reads as it is.
func TestNamesWellFormed(t *testing.T) {
	long := strings.Repeat("日本語の関数", 20)
	in := "main;" + long + " 1\nmain;other 1000\nmain;bad\xff\xfe\x01name\x7f 5\nmain;main.rtl\u202Egnp.exe 5\nmain;zero\u200bwidth\x1b]52;c;aGk=\x07 5\n"
	tr, err := Read(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	svg := svgOf(t, tr)
	checkXML(t, svg)
	for _, want := range []string{`bad\xff\xfe\x01name\x7f`, `main.rtl\u202egnp.exe`, `zero\u200bwidth\x1b]52`, `aGk=\x07`} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the SVG lacks %s, escaped", want)
		}
	}
	for _, r := range []string{"\u202e", "\u200b", "\x1b", "\x07"} {
		if strings.Contains(string(svg), r) {
			t.Errorf("the SVG holds %q raw", r)
		}
	}
	if l := fitLabel(long, 60); !utf8.ValidString(l) || !strings.HasSuffix(l, "..") {
		t.Errorf("fitLabel cut %q", l)
	}
}

// Values past 4.6e14 (a long-running server's alloc_space) keep their
// frames in the HTML page: no product overflows.
func TestHTMLLargeValues(t *testing.T) {
	in := "main;hot 900000000000000\nmain;cold 1000000000000\n"
	tr, err := Read(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, tr, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"hot"`) || !strings.Contains(b.String(), `"cold"`) {
		t.Error("frames vanished from the page")
	}
}

// Sums past int64 and all-zero inputs are errors, not empty graphs.
func TestOverflowAndZero(t *testing.T) {
	for _, in := range []string{
		"a 9223372036854775000\nb 9223372036854775000\n",
		"a 0\nb;c 0\n",
	} {
		if _, err := Read(strings.NewReader(in), Options{}); err == nil {
			t.Errorf("Read(%q): no error", in)
		}
	}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}}}
	fn := &profile.Function{ID: 1, Name: "main.f"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	p.Function, p.Location = []*profile.Function{fn}, []*profile.Location{loc}
	p.Sample = []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{0}}}
	var b bytes.Buffer
	p.Write(&b)
	if _, err := Read(&b, Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("all-zero profile: %v", err)
	}
}

// -diff folds Go names only: perf's [unknown] and [libc.so.6] stay
// apart, and so do memcpy_[k] and memcpy_[j] (both drawn as memcpy).
func TestDiffFoldsGoNamesOnly(t *testing.T) {
	before := "a;[unknown] 1\na;[libc.so.6] 2\na;memcpy_[k] 3\na;memcpy_[j] 4\na;main.f.func1 5\n"
	after := "a;[unknown] 1\na;[libc.so.6] 2\na;memcpy_[k] 3\na;memcpy_[j] 4\na;main.f.func2 5\n"
	tr, err := ReadDiff(strings.NewReader(before), strings.NewReader(after), Options{})
	if err != nil {
		t.Fatal(err)
	}
	kids := tr.Root.Children()[0].Children()
	var names []string
	for _, k := range kids {
		names = append(names, k.Name)
	}
	if len(kids) != 5 {
		t.Errorf("children %q, want [libc.so.6], [unknown], main.f.func*, memcpy twice", names)
	}
	for _, k := range kids {
		if strings.HasPrefix(k.Name, "main.f.func") && (k.Total != 5 || k.Before != 5) {
			t.Errorf("the closure is not one frame: %+v", k)
		}
	}
}

// flamegraph.pl's inputs: two counts per line are a differential graph;
// fractional counts, "# ..." lines and a tab before the count are read;
// perf's annotations come off the names and color the frames; the title
// says samples.
func TestFoldedAsFlamegraphPl(t *testing.T) {
	tr, err := Read(strings.NewReader("main;f 10 30\nmain;g 5 0\n"), Options{})
	if err != nil || !tr.Diff || tr.Root.Total != 30 || tr.Root.Before != 15 {
		t.Fatalf("3 columns: %+v %v", tr, err)
	}
	tr, err = Read(strings.NewReader("# austin: 3.3.0\n# interval: 100\nmain;f\t1.5\nmain;g 2\nmain;h 0.25\n"), Options{})
	if err != nil || tr.Root.Total != 3750 || tr.Scale != 1000 {
		t.Fatalf("fractions: %+v %v", tr, err)
	}
	svg := string(svgOf(t, tr))
	if !strings.Contains(svg, "<title>all (3.75 samples, 100.00%)</title>") {
		t.Errorf("title of fractional counts:\n%s", svg)
	}
	tr, err = Read(strings.NewReader("main;do_syscall_64_[k];memcpy_[k] 4\nmain;Interp_[j] 2\nmain;inl_[i] 1\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	svg = string(svgOf(t, tr))
	for _, want := range []string{`data-name="do_syscall_64"`, `data-name="memcpy"`, `data-name="Interp"`, `rgb(230,140,50)`, `rgb(80,190,80)`, `rgb(80,200,200)`, "(7 samples, 100.00%)"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %s", want)
		}
	}
	if strings.Contains(svg, "_[k]") {
		t.Error("an annotation was left in a name")
	}
}

// Gzipped folded stacks, and standard input as "-".
func TestGzipAndStdin(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte("main;f 3\nmain;g 4\n"))
	w.Close()
	tr, err := Read(bytes.NewReader(gz.Bytes()), Options{})
	if err != nil || tr.Root.Total != 7 {
		t.Fatalf("gzipped folded: %v %v", tr, err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.folded.gz")
	os.WriteFile(in, gz.Bytes(), 0o644)
	f, _ := os.Open(in)
	defer f.Close()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	var o, e bytes.Buffer
	if code := Command([]string{"-"}, &o, &e); code != 0 || !strings.Contains(o.String(), "(7 samples, 100.00%)") {
		t.Errorf("flame -: exit %d, %s", code, e.String())
	}
}

// A profile of a change (allocdiff -o: negative values) is drawn as a
// differential graph, no frame wider than the root.
func TestNegativeValuesAreADiff(t *testing.T) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}
	mk := func(id uint64, name string) *profile.Location {
		fn := &profile.Function{ID: id, Name: name}
		p.Function = append(p.Function, fn)
		l := &profile.Location{ID: id, Line: []profile.Line{{Function: fn}}}
		p.Location = append(p.Location, l)
		return l
	}
	grew, shrank := mk(1, "main.grew"), mk(2, "main.shrank")
	p.Sample = []*profile.Sample{{Location: []*profile.Location{grew}, Value: []int64{100}}, {Location: []*profile.Location{shrank}, Value: []int64{-300}}}
	var b bytes.Buffer
	p.Write(&b)
	tr, err := Read(&b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Diff || tr.Root.Total != 100 || tr.Root.Before != 300 {
		t.Fatalf("change profile: diff %v, after %d, before %d", tr.Diff, tr.Root.Total, tr.Root.Before)
	}
	frames, _ := Layout(tr, 1180, 0.1)
	for _, f := range frames {
		if f.X+f.W > 1180.01 {
			t.Errorf("frame %s drawn past the right edge (%.1f + %.1f)", f.Node.Name, f.X, f.W)
		}
	}
	checkXML(t, svgOf(t, tr))
}

// FuzzWriters: whatever the folded input, the SVG is well-formed XML and
// the HTML valid UTF-8; totals never go negative.
func FuzzWriters(f *testing.F) {
	f.Add("main;日本語 1\nmain;x\xff 2\n")
	f.Add("a;b 1.5\n# c\na\t3\n")
	f.Add("a;b 1 2\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := Read(strings.NewReader(in), Options{})
		if err != nil {
			return
		}
		if tr.Root.Total < 0 || tr.Root.Before < 0 {
			t.Fatalf("negative total %d/%d", tr.Root.Total, tr.Root.Before)
		}
		checkXML(t, svgOf(t, tr))
		var b bytes.Buffer
		if err := WriteHTML(&b, tr, ""); err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(b.Bytes()) {
			t.Fatal("HTML is not valid UTF-8")
		}
	})
}

// treeDiff says where two trees first differ (a frame's name,
// annotation, values or children, children by name), "" when they are
// the same.
func treeDiff(a, b *Node) string {
	if a.Name != b.Name || a.Annot != b.Annot || a.Total != b.Total || a.Before != b.Before {
		return fmt.Sprintf("%s/%d %d %d, %s/%d %d %d", a.Name, a.Annot, a.Total, a.Before, b.Name, b.Annot, b.Total, b.Before)
	}
	ak, bk := a.Children(), b.Children()
	if len(ak) != len(bk) {
		return fmt.Sprintf("%s: %d children, %d", a.Name, len(ak), len(bk))
	}
	for i := range ak {
		if d := treeDiff(ak[i], bk[i]); d != "" {
			return a.Name + ";" + d
		}
	}
	return ""
}

// TestWireMatchesParse: the decoder of a profile's bytes gives the tree
// that github.com/google/pprof/profile's parser gives (the oracle), frame
// for frame, on synthetic profiles (inlined frames, deep stacks, several
// sample types, each shape of the cost benchmark), on a profile of this
// process and on the peers' profiles; the stacks walked in the input's
// bytes and written out, the tree split on other cores from its smallest
// parts.
func TestWireMatchesParse(t *testing.T) {
	var inputs [][]byte
	for seed := int64(1); seed <= 4; seed++ {
		var b bytes.Buffer
		synthprof.Synthetic(seed, 3000, []string{"alloc_objects/count", "alloc_space/bytes"}).Write(&b)
		inputs = append(inputs, b.Bytes())
	}
	for _, name := range []string{"deep", "shallow-1M", "locations-1M"} {
		sh, _ := synthprof.ShapeNamed(name)
		sh.Samples = 4000
		var b bytes.Buffer
		if err := synthprof.NewGraph(4, 2000).WriteProfile(&b, 5, sh, []string{"samples/count", "cpu/nanoseconds"}); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b.Bytes())
	}
	var heap bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&heap, 0); err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, heap.Bytes())
	peers, _ := filepath.Glob("../../shared/peer-cases/pprof/*")
	// The peers' profiles sit beside the checkout when they are at hand;
	// a folder that is there with none in it is a broken path, not a pass.
	if dir := filepath.Dir("../../shared/peer-cases/pprof/*"); len(peers) == 0 {
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%s holds no profiles", dir)
		}
		t.Logf("no peer profiles at %s: only the synthetic and Go's own inputs", dir)
	}
	for _, p := range peers {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
	}
	defer func(v, s int) { framesAbove, spawnAt = v, s }(framesAbove, spawnAt)
	spawnAt = 1
	for _, above := range []int{0, 1 << 30} {
		framesAbove = above
		for i, in := range inputs {
			for _, sample := range []string{"", "alloc_objects"} {
				checkWireTree(t, fmt.Sprintf("input %d, sample %q, frames written out above %d stacks", i, sample, above), in, sample)
			}
		}
	}
}

// checkWireTree reads in as Read does and with the general parser: the
// same tree, type, unit and requests, when the parser reads it.
func checkWireTree(t *testing.T, name string, in []byte, sample string) {
	t.Helper()
	got, err := Read(bytes.NewReader(in), Options{Sample: sample})
	pp, perr := profile.ParseData(in)
	if perr != nil {
		return // not a profile: what Read makes of it is other tests'
	}
	if err != nil {
		if errors.Is(err, ErrEmpty) || errors.Is(err, errOverflow) || strings.Contains(err.Error(), "sample type") {
			return // what Read refuses and the parser does not
		}
		t.Fatalf("%s: profile.Parse reads it, Read says %v", name, err)
	}
	want := &Tree{}
	b := newBuilder(hasNegative(pp))
	if err := profileInto(want, b, pp, Options{Sample: sample}, false); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	want.Root = b.nodes(b.diff)
	if d := treeDiff(got.Root, want.Root); d != "" || got.Sample != want.Sample || got.Unit != want.Unit || got.Requests != want.Requests {
		t.Fatalf("%s: the decoded tree (%s) differs from profile.Parse's (%s): %s", name, got.Sample, want.Sample, d)
	}
}
