package benchwin

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/gorelease"
)

// goroot is the GOROOT of the go command that builds the targets.
func goroot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestOverlayReleases is the benchmark window's layout test, against the
// GOROOT of every supported release.
func TestOverlayReleases(t *testing.T) {
	for _, rel := range gorelease.Supported {
		t.Run(rel, func(t *testing.T) {
			root, err := gorelease.GOROOT(rel)
			if err != nil {
				t.Fatal(err)
			}
			checkOverlay(t, root)
		})
	}
}

func checkOverlay(t *testing.T, goroot string) {
	dir := t.TempDir()
	ov, err := Overlay(goroot, dir, Allocs, Copies)
	if err != nil {
		t.Fatal(err)
	}
	bench := filepath.Join(goroot, "src", "testing", "benchmark.go")
	added := filepath.Join(goroot, "src", "testing", "zz_perfspy_bench.go")
	if len(ov) != 2 || ov[bench] == "" || ov[added] == "" {
		t.Fatalf("overlay %v, want %s and %s", ov, bench, added)
	}
	orig, _ := os.ReadFile(bench)
	patched, _ := os.ReadFile(ov[bench])
	for _, e := range edits {
		if n := strings.Count(string(patched), e.new); n != e.count {
			t.Errorf("patched file has %d of %q, want %d", n, e.new, e.count)
		}
	}
	// Line numbers in profiles must not move.
	if strings.Count(string(orig), "\n") != strings.Count(string(patched), "\n") {
		t.Errorf("the patch changed the line count")
	}
	rec, _ := os.ReadFile(ov[added])
	for _, want := range []string{"//go:linkname allocspyRead runtime.allocspyRead", "//go:linkname copyspyEnable runtime.copyspyEnable",
		"//go:linkname perfspyReadMemStatsSet runtime.allocspyReadMemStats", `var perfspyTableName = [perfspyNTables]string{"allocs", "copies"}`} {
		if !strings.Contains(string(rec), want) {
			t.Errorf("recorder lacks %q", want)
		}
	}
	if strings.Contains(string(rec), "//PERFSPY:TABLES") {
		t.Error("the marker was not replaced")
	}
}

// Without allocspy the recorder reads the statistics with ReadMemStats.
func TestRecorderWithoutAllocspy(t *testing.T) {
	rec := recorder(nil)
	if !strings.Contains(rec, "const perfspyNTables = 0") || strings.Contains(rec, "allocspyReadMemStats") {
		t.Errorf("recorder without tables:\n%s", rec[:min(len(rec), 2000)])
	}
}

func TestOverlayUnknownRelease(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src", "testing")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	// A known release's VERSION, whose file has changed.
	if err := os.WriteFile(filepath.Join(root, "VERSION"), []byte("go1.27.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(goroot(t), "src", "testing", "benchmark.go"))
	if err != nil {
		t.Fatal(err)
	}
	// A release whose StopTimer reads the statistics differently.
	changed := strings.Replace(string(orig), "b.netAllocs += memStats.Mallocs - b.startAllocs", "b.netAllocs += memStats.Mallocs-b.startAllocs", 1)
	if err := os.WriteFile(filepath.Join(src, "benchmark.go"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Overlay(root, t.TempDir(), Allocs)
	if !isShape(err) || !strings.Contains(err.Error(), filepath.Join(src, "benchmark.go")) {
		t.Fatalf("err = %v, want a capability.ShapeError naming the file", err)
	}
	_, err = Overlay(t.TempDir(), t.TempDir())
	if !isShape(err) {
		t.Fatalf("no GOROOT: err = %v", err)
	}
}

// record is one record of a reports file, as the recorder writes it.
func record(name, payload string) string {
	return name + " " + strconv.Itoa(len(payload)) + "\n" + payload + "\n"
}

func TestReadReports(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	frames := record("frames", `[{"pc":1,"frames":[{"func":"p.f","file":"f.go","line":3}]},{"pc":2,"frames":[{"func":"p.g","file":"g.go","line":4}]}]`)
	path := write(ReportsFile, frames+
		record("1.allocs.json", `{"dropped":2,"sites":[{"pcs":[1,2],"truncated":true,"words":[9,9,9,9,0,0,0,0,0],"delta":[5,4,120,128,0,0,0,0,0]}]}`)+
		record("1.copies.json", `{"dropped":0,"sites":[{"pcs":[2],"words":[1,0,0,0,0,0,0,0,0],"delta":[0,1,2,3,4,10,20,30,40]}]}`)+
		record("1.retained.json", `{"untracked":0,"sites":[{"pcs":[1],"objects":1,"bytes":256}]}`)+
		record("1.retained.goroutines", "goroutine 1 [running]:\n")+
		record("1.retained.goroutines.end", "goroutine 1 [running]:\n\ngoroutine 7 [chan receive]:\n")+
		record("bad.json", `{"sites":[{"pcs":[],"words":[1],"delta":[1]}]}`)+
		record("unknown.json", `{"sites":[{"pcs":[3],"objects":1,"bytes":8}]}`)+
		"2.allocs.json 999\n{\"cut\"")
	r, err := OpenReports(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Allocs("1.allocs.json")
	if err != nil {
		t.Fatal(err)
	}
	if s := a.Sites[0]; a.Dropped != 2 || s.Objects != 5 || s.Blocks != 4 || s.ReqBytes != 120 || s.AllocBytes != 128 ||
		len(s.Stack) != 3 || s.Stack[0].Frames[0].Func != "p.f" || s.Stack[1].Frames[0].Func != "p.g" || s.Stack[2].Frames[0].Func != wire.TruncatedFunc {
		t.Errorf("allocs %+v", a)
	}
	c, err := r.Copies("1.copies.json")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sites[0]; s.Kind != "memclr" || s.Calls != [4]uint64{1, 2, 3, 4} || s.Bytes != [4]uint64{10, 20, 30, 40} || s.Stack[0].Frames[0].Line != 4 {
		t.Errorf("copies %+v", c)
	}
	ret, err := r.Retained("1.retained")
	if err != nil || len(ret.Sites) != 1 || ret.Sites[0].Bytes != 256 || ret.Sites[0].Stack[0].Frames[0].Func != "p.f" {
		t.Errorf("retained %+v, %v", ret, err)
	}
	if begin, end, err := r.Goroutines("1.retained"); err != nil || !strings.HasPrefix(string(begin), "goroutine 1 ") || !strings.Contains(string(end), "goroutine 7 ") {
		t.Errorf("goroutines %q %q, %v", begin, end, err)
	}
	for name, want := range map[string]string{"bad.json": "site 0 has 1 and 1 counter words", "unknown.json": "names PC 0x3", "2.allocs.json": "no record 2.allocs.json"} {
		var err error
		if name == "unknown.json" {
			_, err = r.Retained("unknown")
		} else {
			_, err = r.Allocs(name)
		}
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want the file named and %q", name, err, want)
		}
	}
	write(ReportsFile, "1.allocs.json x\n{}\n")
	if _, err := OpenReports(dir); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a bad head: err = %v, want the file named", err)
	}
	write("events.jsonl", `{"name":"BenchmarkA-2","n":10,"seq":3,"benchmem_allocs":1,"benchmem_bytes":2,"allocs":"1.allocs.json"}`+"\n"+`{"name":"B\"x","n":1}`+"\n")
	ev, err := ReadEvents(dir)
	if err != nil || len(ev) != 2 || ev[0].Seq != 3 || ev[1].Name != `B"x` {
		t.Errorf("events %+v, %v", ev, err)
	}
	write("events.jsonl", "{\"name\":1}\n")
	if _, err := ReadEvents(dir); err == nil || !strings.Contains(err.Error(), "events.jsonl:1") {
		t.Errorf("bad event: %v, want the file and line", err)
	}
}

// FuzzReports: whatever the reports file holds, reading it and its
// records returns reports or an error, and never panics.
func FuzzReports(f *testing.F) {
	f.Add([]byte(record("frames", `[{"pc":1,"frames":[{"func":"f"}]}]`) + record("a.json", `{"sites":[{"pcs":[1],"words":[0,0,0,0,0,0,0,0,0],"delta":[1,1,8,8,0,0,0,0,0]}]}`)))
	f.Add([]byte("a.json 3\n{}}\n"))
	f.Add([]byte("frames -1\n"))
	f.Add([]byte("a.json 9223372036854775807\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseReports("reports", b)
		if err != nil {
			return
		}
		for name := range r.records {
			base := strings.TrimSuffix(name, ".json")
			r.Allocs(name)
			r.Copies(name)
			r.Retained(base)
			r.Goroutines(base)
		}
	})
}

// FuzzReadEvents: whatever the file holds, ReadEvents returns events or an
// error, and never panics.
func FuzzReadEvents(f *testing.F) {
	f.Add([]byte(`{"name":"BenchmarkA-2","n":10,"seq":3}` + "\n"))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		ev, err := ReadEvents(dir)
		if err == nil && len(ev) > strings.Count(string(b), "\n")+1 {
			t.Errorf("%d events from %d lines", len(ev), strings.Count(string(b), "\n")+1)
		}
	})
}

// isShape tells the one error of a Go release an overlay does not know.
func isShape(err error) bool {
	var se *capability.ShapeError
	return errors.As(err, &se) && errors.Is(err, capability.ErrNotSupported)
}

// TestFollowReports: Update reads the records the recorder appended since
// the last read, a record cut short once it is whole, while a reader of
// the records read so far runs beside it (go test -race); an error names
// the record's offset in the whole file.
func TestFollowReports(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ReportsFile)
	r := FollowReports(dir)
	if err := r.Update(); err != nil {
		t.Fatalf("no file yet: %v", err)
	}
	frames := record("frames", `[{"pc":1,"frames":[{"func":"p.f","file":"f.go","line":3}]}]`)
	allocs := func(n int) string {
		return record(strconv.Itoa(n)+".allocs.json", `{"dropped":0,"sites":[{"pcs":[1],"words":[0,0,0,0,0,0,0,0,0],"delta":[`+strconv.Itoa(n)+`,1,8,8,0,0,0,0,0]}]}`)
	}
	whole := frames + allocs(1) + allocs(2) + allocs(3)
	cut := len(frames) + len(allocs(1)) + 10 // inside 2.allocs.json
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			if a, err := r.Allocs("1.allocs.json"); err == nil && a.Sites[0].Objects != 1 {
				t.Errorf("1.allocs.json read %d objects", a.Sites[0].Objects)
			}
		}
	}()
	for i, part := range []string{whole[:cut], whole[cut : len(whole)-1], whole[len(whole)-1:]} {
		if _, err := f.WriteString(part); err != nil {
			t.Fatal(err)
		}
		if err := r.Update(); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		for n := 1; n <= 3; n++ {
			a, err := r.Allocs(strconv.Itoa(n) + ".allocs.json")
			wantRead := n == 1 || n == 2 && i >= 1 || n == 3 && i == 2
			if (err == nil) != wantRead || err == nil && a.Sites[0].Objects != uint64(n) {
				t.Errorf("after part %d: %d.allocs.json: %+v, %v; want it read: %v", i, n, a, err, wantRead)
			}
		}
	}
	<-done
	if _, err := f.WriteString("4.allocs.json x\n{}\n"); err != nil {
		t.Fatal(err)
	}
	if err := r.Update(); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset "+strconv.Itoa(len(whole))) {
		t.Errorf("a bad head after %d bytes: err = %v, want the file and the offset named", len(whole), err)
	}
}

// TestFollowEvents: Next returns the events written whole since the last
// call, a line cut short once it is whole, and names the file and line
// of a bad one.
func TestFollowEvents(t *testing.T) {
	dir := t.TempDir()
	tail := FollowEvents(dir)
	if ev, err := tail.Next(); err != nil || len(ev) != 0 {
		t.Fatalf("no file yet: %v, %v", ev, err)
	}
	f, err := os.Create(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := `{"name":"BenchmarkA-2","n":1,"seq":1}` + "\n" + `{"name":"BenchmarkB-2","n":2,"seq":2}` + "\n" + `{"name":"BenchmarkC-2","n":3,"seq":3}` + "\n"
	cut1, cut2 := 10, strings.Index(lines, "BenchmarkC")
	for i, c := range []struct {
		part string
		want []string
	}{{lines[:cut1], nil}, {lines[cut1:cut2], []string{"BenchmarkA-2", "BenchmarkB-2"}}, {lines[cut2:], []string{"BenchmarkC-2"}}, {"", nil}} {
		f.WriteString(c.part)
		ev, err := tail.Next()
		var got []string
		for _, e := range ev {
			got = append(got, e.Name)
		}
		if err != nil || strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("after part %d: %q, %v; want %q", i, got, err, c.want)
		}
	}
	f.WriteString("{\"name\":1}\n")
	if _, err := tail.Next(); err == nil || !strings.Contains(err.Error(), "events.jsonl:4") {
		t.Errorf("a bad fourth line: %v, want the file and line named", err)
	}
}
