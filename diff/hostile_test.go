package diff

import (
	"bytes"
	"compress/gzip"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/synthprof"
)

// TestLoadBomb: a gzipped profile that inflates past -max-profile-size
// is refused with the limit and the flag named.
func TestLoadBomb(t *testing.T) {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	zeros := make([]byte, 1<<20)
	for range 64 {
		gz.Write(zeros)
	}
	gz.Close()
	dir := t.TempDir()
	bomb := filepath.Join(dir, "bomb.pb.gz")
	os.WriteFile(bomb, b.Bytes(), 0o644)
	var o, e bytes.Buffer
	code := Command([]string{"-max-profile-size", "8388608", bomb, bomb}, &o, &e)
	if code != 1 || !strings.Contains(e.String(), "-max-profile-size") || !strings.Contains(e.String(), "bomb.pb.gz") {
		t.Errorf("allocdiff on a gzip bomb: exit %d, %q", code, e.String())
	}
	e.Reset()
	if code := Command([]string{dir, bomb}, &o, &e); code != 1 || !strings.Contains(e.String(), "is a folder") {
		t.Errorf("allocdiff FOLDER: exit %d, %q", code, e.String())
	}
}

// TestOutputIsInput: allocdiff -o X X Y overwrote X; now it is refused
// and X is kept.
func TestOutputIsInput(t *testing.T) {
	dir := t.TempDir()
	x, y := filepath.Join(dir, "x.pb.gz"), filepath.Join(dir, "y.pb.gz")
	src := synthprof.Encode(synthprof.Synthetic(1, 20, []string{"alloc_objects/count", "alloc_space/bytes"}))
	os.WriteFile(x, src, 0o644)
	os.WriteFile(y, src, 0o644)
	hard := filepath.Join(dir, "hard.pb.gz")
	os.Link(y, hard)
	for _, out := range []string{x, hard} {
		var o, e bytes.Buffer
		if code := Command([]string{"-o", out, x, y}, &o, &e); code != 2 || !strings.Contains(e.String(), "refusing to overwrite") {
			t.Errorf("allocdiff -o %s x y: exit %d, %q", filepath.Base(out), code, e.String())
		}
	}
	if b, _ := os.ReadFile(x); !bytes.Equal(b, src) {
		t.Error("the input was overwritten")
	}
	var o, e bytes.Buffer
	if code := Command([]string{"-o", filepath.Join(dir, "d.pb.gz"), x, y}, &o, &e); code != 0 {
		t.Errorf("allocdiff -o NEW: exit %d, %s", code, e.String())
	}
}

// TestHostileNames: a function name with an OSC 52 clipboard write, a
// newline, a bidirectional override, a backtick and a pipe reaches none
// of allocdiff's text, markdown and CSV outputs raw.
func TestHostileNames(t *testing.T) {
	dir := t.TempDir()
	bad := "main.evil\x1b]52;c;aGk=\x07\nrow|`x`\u202egnp.exe"
	mk := func(name string, v int64) []byte {
		fn := &profile.Function{ID: 1, Name: bad}
		loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
		p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}},
			Sample: []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{v, 16 * v}}}, Location: []*profile.Location{loc}, Function: []*profile.Function{fn},
			Comments: []string{"perfspy.requests=10"}}
		path := filepath.Join(dir, name)
		var buf bytes.Buffer
		p.Write(&buf)
		os.WriteFile(path, buf.Bytes(), 0o644)
		return nil
	}
	a, b := filepath.Join(dir, "a.pb.gz"), filepath.Join(dir, "b.pb.gz")
	mk("a.pb.gz", 10)
	mk("b.pb.gz", 30)
	for _, format := range []string{"text", "markdown", "csv"} {
		var o, e bytes.Buffer
		if code := Command([]string{"-format", format, "-top", "0", "-fold-closures=false", a, b}, &o, &e); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, e.String())
		}
		out := o.String()
		for _, raw := range []string{"\x1b", "\x07", "\u202e", "evil\x1b", "\nrow"} {
			if strings.Contains(out, raw) {
				t.Errorf("%s: the output holds %q raw", format, raw)
			}
		}
		if !strings.Contains(out, `\x1b]52`) || !strings.Contains(out, `\u202egnp.exe`) {
			t.Errorf("%s: the name is not shown escaped:\n%s", format, out)
		}
		if format == "markdown" {
			lines := strings.Split(out, "\n")
			cols := strings.Count(lines[2], "|") // the header
			for _, line := range lines {
				if strings.Contains(line, "evil") && (!strings.HasPrefix(line, "| ``main.evil") || strings.Count(line, "|")-strings.Count(line, `\|`) != cols) {
					t.Errorf("markdown row broken: %q", line)
				}
			}
		}
	}
}

// TestOverflow: values that add up past 2^63 (two samples of the largest
// int64 in one file, or two such files on one side) are an error naming
// the file or the side, never a wrapped sum.
func TestOverflow(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, values ...int64) string {
		fn := &profile.Function{ID: 1, Name: "main.f"}
		loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
		p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}, Location: []*profile.Location{loc}, Function: []*profile.Function{fn},
			Comments: []string{"perfspy.requests=10"}}
		for _, v := range values {
			p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{v}})
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, encode(t, p), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	small := mk("small.pb", 10)
	twice := mk("twice.pb", math.MaxInt64, math.MaxInt64)
	big := mk("big.pb", math.MaxInt64)
	// Negative values (a diff profile's) wrap below -2^63 as silently.
	negTwice := mk("negtwice.pb", math.MinInt64, -10)
	negBig := mk("negbig.pb", math.MinInt64+5)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{small, twice}, "twice.pb: its alloc_space values add up to more than 2^63"},
		{[]string{big, big, "--", small}, "the before profiles' alloc_space values add up to more than 2^63"},
		{[]string{small, negTwice}, "negtwice.pb: its alloc_space values add up to more than 2^63"},
		{[]string{negBig, negBig, "--", small}, "the before profiles' alloc_space values add up to more than 2^63"},
	} {
		var o, e bytes.Buffer
		if code := Command(c.args, &o, &e); code == 0 || !strings.Contains(e.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want an error saying %q", c.args, code, e.String(), c.want)
		}
	}
}
