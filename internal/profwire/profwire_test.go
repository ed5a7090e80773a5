package profwire

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/synthprof"
)

// content is a profile's samples as go tool pprof's parser sees them:
// stack (function:line of every frame, leaf first) -> values added up,
// with the tables' strings.
type content struct {
	Types    []ValueType
	Default  string
	Comments []string
	Stacks   map[string][]int64
}

func frameKey(name string, line int64) string { return fmt.Sprintf("%s:%d", name, line) }

func ofParsed(pp *profile.Profile) content {
	c := content{Default: pp.DefaultSampleType, Comments: pp.Comments, Stacks: map[string][]int64{}}
	for _, st := range pp.SampleType {
		c.Types = append(c.Types, ValueType{st.Type, st.Unit})
	}
	for _, s := range pp.Sample {
		var k strings.Builder
		for _, l := range s.Location {
			if len(l.Line) == 0 {
				fmt.Fprintf(&k, "%x", l.Address)
			}
			for _, ln := range l.Line {
				k.WriteString("|" + frameKey(ln.Function.Name, ln.Line))
			}
			k.WriteByte(';')
		}
		add(c.Stacks, k.String(), s.Value)
	}
	return c
}

func ofDecoded(p *Profile) content {
	c := content{Types: p.Types, Default: p.DefaultType, Comments: p.Comments, Stacks: map[string][]int64{}}
	for i := 0; i < p.NumStacks(); i++ {
		var k strings.Builder
		for _, l := range p.Stack(i, nil) {
			fns := p.Lines(l)
			if len(fns) == 0 {
				fmt.Fprintf(&k, "%x", p.Address(l))
			}
			for j, f := range fns {
				k.WriteString("|" + frameKey(p.FuncName(f), p.Line(l, j)))
			}
			k.WriteByte(';')
		}
		v := make([]int64, len(p.Types))
		for t := range v {
			v[t] = p.Value(i, t)
		}
		add(c.Stacks, k.String(), v)
	}
	return c
}

func add(m map[string][]int64, k string, v []int64) {
	if m[k] == nil {
		m[k] = make([]int64, len(v))
	}
	for i := range v {
		m[k][i] += v[i]
	}
}

func gunzip(t testing.TB, b []byte) []byte {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b
	}
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// check decodes raw and compares with profile.ParseUncompressed: both
// read it or both refuse it, and what they read is the same.
func check(t testing.TB, name string, raw []byte) {
	t.Helper()
	pp, perr := profile.ParseUncompressed(raw)
	if perr == nil {
		perr = pp.CheckValid()
	}
	p, err := Decode(raw)
	switch {
	case perr != nil && err == nil:
		t.Fatalf("%s: profile.Parse refuses it (%v), Decode reads it", name, perr)
	case perr == nil && err != nil:
		t.Fatalf("%s: profile.Parse reads it, Decode says %v", name, err)
	case err != nil:
		return
	}
	want, got := ofParsed(pp), ofDecoded(p)
	if len(want.Comments) == 0 {
		want.Comments = nil
	}
	if len(got.Comments) == 0 {
		got.Comments = nil
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%s: decoded differs from profile.Parse:\n got %+v\nwant %+v", name, got.Types, want.Types)
	}
	if conv := ofDecoded(FromProfile(pp)); !reflect.DeepEqual(ofParsed(pp), conv) {
		t.Fatalf("%s: FromProfile differs from the profile", name)
	}
	if p.Samples != len(pp.Sample) {
		t.Fatalf("%s: %d samples, profile.Parse %d", name, p.Samples, len(pp.Sample))
	}
}

func TestAgreesWithParse(t *testing.T) {
	var b bytes.Buffer
	synthprof.Synthetic(1, 2000, []string{"alloc_objects/count", "alloc_space/bytes"}).Write(&b)
	check(t, "synthetic", gunzip(t, b.Bytes()))
	for _, name := range []string{"deep", "shallow-1M", "locations-1M"} {
		sh, _ := synthprof.ShapeNamed(name)
		sh.Samples = 5000
		b.Reset()
		if err := synthprof.NewGraph(2, 3000).WriteProfile(&b, 3, sh, []string{"samples/count", "cpu/nanoseconds"}); err != nil {
			t.Fatal(err)
		}
		check(t, name, gunzip(t, b.Bytes()))
	}
	// Distinct stacks past the point where interning stops.
	sh, _ := synthprof.ShapeNamed("locations-1M")
	sh.Samples = 70000
	b.Reset()
	synthprof.NewGraph(2, 3000).WriteProfile(&b, 3, sh, []string{"samples/count"})
	check(t, "distinct", gunzip(t, b.Bytes()))
	peers, _ := filepath.Glob("../../../shared/peer-cases/pprof/*")
	// The peers' profiles sit beside the checkout when they are at hand;
	// a folder that is there with none in it is a broken path, not a pass.
	if dir := filepath.Dir("../../../shared/peer-cases/pprof/*"); len(peers) == 0 {
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%s holds no profiles", dir)
		}
		t.Logf("no peer profiles at %s: only the synthetic and Go's own inputs", dir)
	}
	for _, f := range peers {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(t, f, gunzip(t, b))
	}
	// Go's own profiles, with mappings, labels and comments.
	b.Reset()
	p := synthprof.Synthetic(5, 50, []string{"samples/count"})
	p.Comments = []string{"perfspy.requests=10"}
	p.Sample[0].Label = map[string][]string{"route": {"GET /"}}
	p.Write(&b)
	check(t, "labels", gunzip(t, b.Bytes()))
}

// Samples that share a stack become one stack, their values added up.
func TestInterns(t *testing.T) {
	p := synthprof.Synthetic(1, 10, []string{"samples/count"})
	p.Sample = append(p.Sample, p.Sample...)
	var b bytes.Buffer
	p.Write(&b)
	d, err := Decode(gunzip(t, b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if d.Samples != 20 || d.NumStacks() != 10 {
		t.Fatalf("%d samples in %d stacks, want 20 in 10", d.Samples, d.NumStacks())
	}
	if got, want := d.Value(0, 0), 2*p.Sample[0].Value[0]; got != want {
		t.Fatalf("stack 0 has %d, want %d", got, want)
	}
}

func FuzzDecode(f *testing.F) {
	var b bytes.Buffer
	sh, _ := synthprof.ShapeNamed("deep")
	sh.Samples, sh.MinDepth, sh.MaxDepth = 4, 2, 4
	synthprof.NewGraph(1, 40).WriteProfile(&b, 1, sh, []string{"alloc_objects/count", "alloc_space/bytes"})
	f.Add(gunzip(f, b.Bytes()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		check(t, "input", raw)
	})
}

// DecodeStream, reading as it decodes, reads what Decode reads, in
// pieces of any size, and a trailer that says too little or too much.
func TestDecodeStream(t *testing.T) {
	sh, _ := synthprof.ShapeNamed("deep")
	sh.Samples = 3000
	var b bytes.Buffer
	synthprof.NewGraph(2, 3000).WriteProfile(&b, 3, sh, []string{"samples/count", "cpu/nanoseconds"})
	raw := gunzip(t, b.Bytes())
	want, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{int64(len(raw)), 0, int64(len(raw)) / 2, int64(len(raw)) * 2, 1} {
		p, data, err := DecodeStream(iotest.HalfReader(bytes.NewReader(raw)), size)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(data, raw) || !reflect.DeepEqual(ofDecoded(p), ofDecoded(want)) {
			t.Fatalf("size %d: not what Decode reads", size)
		}
	}
	// Cut short: malformed, with the bytes; a reader's error as it is.
	if _, data, err := DecodeStream(bytes.NewReader(raw[:len(raw)-3]), int64(len(raw))); !errors.Is(err, ErrMalformed) || len(data) != len(raw)-3 {
		t.Fatalf("cut short: %v, %d bytes", err, len(data))
	}
	boom := errors.New("boom")
	if _, _, err := DecodeStream(io.MultiReader(bytes.NewReader(raw[:1000]), iotest.ErrReader(boom)), int64(len(raw))); err != boom {
		t.Fatalf("a reader's error: %v", err)
	}
}

// TestFieldEndReaderFails: a field whose first bytes are in when the
// reader then fails ends decoding at its start (it panicked, slicing the
// buffer to the 0 the failed wait returns).
func TestFieldEndReaderFails(t *testing.T) {
	const off = 988
	for _, c := range []struct {
		field []byte
		in    int // bytes in from off when the reader fails
	}{
		{[]byte{0x0a, 0x80}, 2},  // a cut length: waits for the varints
		{[]byte{0x0a, 0x7f}, 25}, // 127 bytes, 23 in: waits for the field
	} {
		b := make([]byte, 4096)
		copy(b[off:], c.field)
		st := &stream{buf: b, kick: make(chan struct{}, 1)}
		st.avail.Store(int64(off + c.in))
		go func() {
			time.Sleep(10 * time.Millisecond) // fieldEnd is waiting for more
			st.err = errors.New("boom")
			st.avail.Store(math.MaxInt64)
			st.kick <- struct{}{}
		}()
		if end := st.fieldEnd(b, off); end != off {
			t.Errorf("field % x, %d bytes in: ends at %d, want %d (decoding stops)", c.field, c.in, end, off)
		}
	}
}
