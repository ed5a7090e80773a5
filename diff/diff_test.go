package diff

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	goldenfile "github.com/perfspy/perfspy/internal/golden"
	"github.com/perfspy/perfspy/internal/synthprof"
	"github.com/perfspy/perfspy/internal/testtarget"
	"github.com/perfspy/perfspy/profkey"
)

var update = flag.Bool("update", false, "rewrite golden files")

// buildProg builds version v of testdata/prog in its own directory as module
// example.com/prog, runs it and returns its allocation profile.
func buildProg(t *testing.T, v string, trimpath bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "build-"+v)
	os.MkdirAll(dir, 0o755)
	src, err := os.ReadFile(filepath.Join("testdata", "prog", v, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	mod, _ := os.ReadFile(filepath.Join("testdata", "prog", "go.mod.txt"))
	os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), mod, 0o644)
	args := []string{"build", "-o", "prog"}
	if trimpath {
		args = append(args, "-trimpath")
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", v, err, out)
	}
	prof := filepath.Join(dir, "allocs.pb.gz")
	if out, err := exec.Command(filepath.Join(dir, "prog"), "-o", prof).CombinedOutput(); err != nil {
		testtarget.SkipIfForeign(t, err)
		t.Fatalf("running %s: %v\n%s", v, err, out)
	}
	return prof
}

// TestTwoBuilds: version 2, built in another directory with -trimpath, adds
// a closure above the allocating closure and one new site allocating 300
// times. Only the new site changes.
func TestTwoBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	before, after := buildProg(t, "v1", false), buildProg(t, "v2", true)
	b, err := Load([]string{before}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := Load([]string{after}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compare(b, a, Options{Sample: "alloc_objects", Folds: profkey.DefaultFolds})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res.Write(&out, "text", 10)
	t.Logf("\n%s", out.String())
	for _, row := range res.Rows {
		if !strings.HasPrefix(row.Key, "main.") {
			continue
		}
		switch row.Key {
		case "main.newSite":
			if row.FlatDelta() != 300 {
				t.Errorf("main.newSite: flat delta %d, want 300", row.FlatDelta())
			}
		default:
			if row.FlatDelta() != 0 {
				t.Errorf("%s: flat delta %d, want 0 (not a change)", row.Key, row.FlatDelta())
			}
		}
	}
	var sum int64
	for _, row := range res.Rows {
		sum += row.FlatDelta()
	}
	if sum != res.TotalAfter-res.TotalBefore || res.Remainder(len(res.Rows)) != 0 {
		t.Errorf("rows add up to %d, total changed by %d", sum, res.TotalAfter-res.TotalBefore)
	}
	// Without the closure fold, the renumbered closure is a change: the
	// fold is what makes it disappear.
	raw, _ := Compare(b, a, Options{Sample: "alloc_objects", Folds: profkey.Folds{Generics: true, Wrappers: true, Versions: true}})
	moved := 0
	for _, row := range raw.Rows {
		if strings.HasPrefix(row.Key, "main.main.func") && row.FlatDelta() != 0 {
			moved++
		}
	}
	if moved == 0 {
		t.Error("without -fold-closures the renumbered closure should show as -X and +X")
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o644)
		return p
	}
	heap := write("heap.pb.gz", encode(t, synthprof.Synthetic(1, 50, []string{"alloc_objects/count", "alloc_space/bytes"})))
	cpu := write("cpu.pb.gz", encode(t, synthprof.Synthetic(2, 50, []string{"samples/count", "cpu/nanoseconds"})))
	full := encode(t, synthprof.Synthetic(3, 50, []string{"alloc_objects/count", "alloc_space/bytes"}))
	trunc := write("trunc.pb.gz", full[:len(full)/2])
	empty := write("empty.pb.gz", nil)
	garbage := write("garbage.pb.gz", []byte("this is not a profile"))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{heap, filepath.Join(dir, "missing.pb.gz")}, 1, "missing.pb.gz"},
		{[]string{heap, empty}, 1, "empty.pb.gz: empty file"},
		{[]string{heap, garbage}, 1, "garbage.pb.gz: not a pprof profile"},
		{[]string{heap, trunc}, 1, "trunc.pb.gz"},
		{[]string{heap, cpu}, 1, "cpu.pb.gz has no sample type"},
		{[]string{"-sample", "nosuch", heap, heap}, 1, `no sample type "nosuch"`},
		{[]string{heap}, 2, "want BEFORE AFTER"},
		{[]string{"-format", "xml", heap, heap}, 2, "-format"},
		{[]string{"-inline", "maybe", heap, heap}, 2, "-inline"},
		{[]string{"-max-regress", "lots", heap, heap}, 2, "-max-regress"},
		{[]string{filepath.Join(dir, "*.nomatch"), heap}, 2, "no file matches"},
	} {
		var o, e bytes.Buffer
		code := Command(tc.args, &o, &e)
		if code != tc.code || !strings.Contains(e.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, e.String(), tc.code, tc.want)
		}
	}
}

func TestGate(t *testing.T) {
	dir := t.TempDir()
	b := synthprof.Synthetic(7, 200, []string{"alloc_objects/count", "alloc_space/bytes"})
	a := b.Copy()
	a.Sample[0].Value[1] += 1000
	bp, ap := filepath.Join(dir, "b.pb.gz"), filepath.Join(dir, "a.pb.gz")
	os.WriteFile(bp, encode(t, b), 0o644)
	os.WriteFile(ap, encode(t, a), 0o644)
	var o, e bytes.Buffer
	if code := Command([]string{"-max-regress", "0%", bp, ap}, &o, &e); code != 1 || !strings.Contains(e.String(), "grew most") {
		t.Errorf("gate: exit %d, %q", code, e.String())
	}
	o.Reset()
	e.Reset()
	if code := Command([]string{"-max-regress", "50%", bp, ap}, &o, &e); code != 0 {
		t.Errorf("under the gate: exit %d, %q", code, e.String())
	}
	if code := Command([]string{"-max-regress-abs", "999", bp, ap}, &o, &e); code != 1 {
		t.Errorf("abs gate: exit %d", code)
	}
}

// TestRowsAddUp: on synthetic profiles, the flat deltas of all rows, or of
// the top N plus the remainder, always equal the change of the total.
func TestRowsAddUp(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		b := &Side{Files: []string{"b"}, Profiles: []*profile.Profile{synthprof.Synthetic(seed, 300, []string{"alloc_space/bytes"})}, Requests: []int64{0}}
		a := &Side{Files: []string{"a"}, Profiles: []*profile.Profile{synthprof.Synthetic(seed+100, 300, []string{"alloc_space/bytes"})}, Requests: []int64{0}}
		for _, f := range []profkey.Folds{{}, profkey.DefaultFolds, {Inline: true, Lines: true}} {
			r, err := Compare(b, a, Options{Folds: f, Stacks: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{0, 5, len(r.Rows)} {
				var s int64
				for _, row := range r.Rows[:n] {
					s += row.FlatDelta()
				}
				if s+r.Remainder(n) != r.TotalAfter-r.TotalBefore {
					t.Fatalf("seed %d folds %+v top %d: rows %d + remainder %d != total change %d", seed, f, n, s, r.Remainder(n), r.TotalAfter-r.TotalBefore)
				}
			}
			// The diff profile carries the same change per key.
			dp := r.DiffProfile()
			if err := dp.CheckValid(); err != nil {
				t.Fatal(err)
			}
			var tot int64
			for _, s := range dp.Sample {
				tot += s.Value[0]
			}
			if tot != r.TotalAfter-r.TotalBefore {
				t.Fatalf("diff profile total %d, change %d", tot, r.TotalAfter-r.TotalBefore)
			}
		}
	}
}

func TestFormatsGolden(t *testing.T) {
	b := synthprof.Synthetic(11, 100, []string{"alloc_objects/count", "alloc_space/bytes"})
	a := synthprof.Synthetic(12, 100, []string{"alloc_objects/count", "alloc_space/bytes"})
	b.Comments = []string{profkey.RequestsComment + "1000"}
	a.Comments = []string{profkey.RequestsComment + "1250"}
	r, err := Compare(&Side{Files: []string{"b"}, Profiles: []*profile.Profile{b}, Requests: []int64{1000}},
		&Side{Files: []string{"a"}, Profiles: []*profile.Profile{a}, Requests: []int64{1250}}, Options{Folds: profkey.DefaultFolds})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		var buf bytes.Buffer
		if err := r.Write(&buf, f, 8); err != nil {
			t.Fatal(err)
		}
		golden(t, "golden/diff."+f, buf.Bytes())
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got, *update)
}

func FuzzParse(f *testing.F) {
	f.Add(synthprof.Encode(synthprof.Synthetic(1, 20, []string{"alloc_objects/count", "alloc_space/bytes"})))
	f.Add([]byte{})
	f.Add([]byte("\x1f\x8b\x08\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		s := &Side{Files: []string{"x"}, Profiles: []*profile.Profile{p}, Requests: []int64{profkey.Requests(p)}}
		if r, err := Compare(s, s, Options{Folds: profkey.DefaultFolds}); err == nil {
			if r.TotalAfter != r.TotalBefore || r.Remainder(0) != 0 {
				t.Fatal("a profile against itself changed")
			}
			var buf bytes.Buffer
			r.Write(&buf, "json", 5)
		}
	})
}

// TestRealVersions compares two released versions of go-httpbin whose /get
// handler did not change (testdata/httpbin/README.md): per request, nothing
// moves, and the rows add up.
func TestRealVersions(t *testing.T) {
	var o, e bytes.Buffer
	if code := Command([]string{"-format", "json", "-top", "0", "testdata/httpbin/v2.25.0.allocs.pb.gz", "testdata/httpbin/v2.26.0.allocs.pb.gz"}, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	b, _ := Load([]string{"testdata/httpbin/v2.25.0.allocs.pb.gz"}, LoadOptions{})
	a, _ := Load([]string{"testdata/httpbin/v2.26.0.allocs.pb.gz"}, LoadOptions{})
	r, err := Compare(b, a, Options{Folds: profkey.DefaultFolds})
	if err != nil {
		t.Fatal(err)
	}
	if !r.PerRequest {
		t.Fatal("the profiles carry perfspy.requests")
	}
	pb, pa := float64(r.TotalBefore)/float64(r.ReqBefore), float64(r.TotalAfter)/float64(r.ReqAfter)
	t.Logf("B/req: %.2f -> %.2f", pb, pa)
	if d := (pa - pb) / pb; d > 0.001 || d < -0.001 {
		t.Errorf("B/req moved %.3f%% between versions whose handler did not change", 100*d)
	}
	for _, row := range r.Rows {
		if d := row.FlatAfterPR - row.FlatBeforePR; d > 1 || d < -1 {
			t.Errorf("%s moved %.2f B/req", row.Key, d)
		}
		if strings.Contains(row.Key, "go-httpbin/v2/") {
			t.Errorf("%s: the module's major version was not folded", row.Key)
		}
	}
	golden(t, "golden/httpbin.md", func() []byte { var buf bytes.Buffer; r.Write(&buf, "markdown", 10); return buf.Bytes() }())
}

// TestSeveralFilesPerSide merges files per side and gives each row the
// Mann-Whitney U p-value of its per-file values; the -o profile opens in
// go tool pprof.
func TestSeveralFilesPerSide(t *testing.T) {
	dir := t.TempDir()
	var bs, as []string
	for i := 0; i < 4; i++ {
		b := synthprof.Synthetic(50, 200, []string{"alloc_objects/count", "alloc_space/bytes"})
		a := b.Copy()
		// One function grows in every after file: a real, consistent change.
		for _, s := range a.Sample {
			if s.Location[0].Line[0].Function.ID == b.Sample[0].Location[0].Line[0].Function.ID {
				s.Value[1] += 5000
			}
		}
		for j, s := range b.Sample { // noise that differs per file
			s.Value[1] += int64((i*7 + j) % 3)
		}
		bp, ap := filepath.Join(dir, "b"+string(rune('0'+i))+".pb.gz"), filepath.Join(dir, "a"+string(rune('0'+i))+".pb.gz")
		os.WriteFile(bp, encode(t, b), 0o644)
		os.WriteFile(ap, encode(t, a), 0o644)
		bs, as = append(bs, bp), append(as, ap)
	}
	out := filepath.Join(dir, "diff.pb.gz")
	var o, e bytes.Buffer
	args := append(append(append([]string{"-format", "json", "-top", "3", "-o", out}, bs...), "--"), as...)
	if code := Command(args, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	if !strings.Contains(o.String(), `"p": 0.0`) {
		t.Errorf("the growing row has no small p-value:\n%s", o.String())
	}
	// The glob form reads the same files.
	o.Reset()
	if code := Command([]string{"-format", "csv", filepath.Join(dir, "b*.pb.gz"), filepath.Join(dir, "a*.pb.gz")}, &o, &e); code != 0 || !strings.Contains(o.String(), ",p") {
		t.Errorf("globs: exit %d, %q", code, o.String()[:min(200, o.Len())])
	}
	if testing.Short() {
		t.Skip("go tool pprof on the -o profile; skipped with -short")
	}
	pp, err := exec.Command("go", "tool", "pprof", "-top", out).CombinedOutput()
	if err != nil || !strings.Contains(string(pp), "flat") {
		t.Errorf("go tool pprof -top on the -o profile: %v\n%s", err, pp)
	}
}

// TestPerOps: plain profiles (no count) are totals, said so; -per N
// divides them per op; probe run -bench's profiles are per op by their
// comments; a bad -per is a usage error naming the flag.
func TestPerOps(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, p *profile.Profile) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, encode(t, p), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	types := []string{"alloc_objects/count", "alloc_space/bytes"}
	b, a := synthprof.Synthetic(21, 40, types), synthprof.Synthetic(22, 40, types)
	plainB, plainA := write("b.pb.gz", b), write("a.pb.gz", a)
	run := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := Command(args, &o, &e)
		return code, o.String(), e.String()
	}
	code, out, _ := run(plainB, plainA)
	if code != 0 || !strings.Contains(out, "no request or op count") || strings.Contains(out, "/op") {
		t.Errorf("plain profiles: exit %d\n%s", code, out)
	}
	code, out, _ = run("-per", "100,200", plainB, plainA)
	if code != 0 || !strings.Contains(out, "ops before 100 after 200") || !strings.Contains(out, "before/op") {
		t.Errorf("-per 100,200: exit %d\n%s", code, out)
	}
	// The per-op total is the total over the ops.
	var j struct {
		Total struct{ Before, After int64 }
		Rows  []struct {
			Before, After int64
			BeforePerRq   float64 `json:"before_per_request"`
		}
	}
	code, out, _ = run("-per", "100", "-format", "json", "-top", "0", plainB, plainA)
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil {
		t.Fatalf("json: exit %d, %v\n%s", code, err, out)
	}
	for _, r := range j.Rows {
		if r.BeforePerRq != float64(r.Before)/100 {
			t.Errorf("row %d before, %v per op; want /100", r.Before, r.BeforePerRq)
		}
	}
	b.Comments = []string{profkey.RequestsComment + "50", BenchComment + "BenchmarkX-2"}
	a.Comments = []string{profkey.RequestsComment + "60", BenchComment + "BenchmarkX-2"}
	code, out, _ = run(write("bb.pb.gz", b), write("ba.pb.gz", a))
	if code != 0 || !strings.Contains(out, "ops before 50 after 60") {
		t.Errorf("bench profiles: exit %d\n%s", code, out)
	}
	for _, bad := range []string{"0", "x", "5,", "-3"} {
		if code, _, errOut := run("-per", bad, plainB, plainA); code != 2 || !strings.Contains(errOut, "-per") {
			t.Errorf("-per %q: exit %d, %q", bad, code, errOut)
		}
	}
}
