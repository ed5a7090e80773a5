package elfsym

import (
	"debug/dwarf"
	"debug/elf"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestInlines: the instructions of sumsq's line, inlined into scale and
// scale into main, are sumsq at its line, then scale at its call of
// sumsq, then main at its call of scale (as the DWARF line table and
// the source say); kept's own are kept alone.
func TestInlines(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "inl")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/inl").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	in, err := OpenInlines(bin)
	if err != nil {
		t.Fatal(err)
	}
	// The addresses of each line of main.go, from the line table.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[int][]uint64{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		lr, err := d.LineReader(e)
		if err != nil || lr == nil {
			continue
		}
		var row dwarf.LineEntry
		for lr.Next(&row) == nil {
			if strings.HasSuffix(row.File.Name, "testdata/inl/main.go") {
				addrs[row.Line] = append(addrs[row.Line], row.Address)
			}
		}
		r.SkipChildren()
	}
	frames := func(line int) string {
		if len(addrs[line]) == 0 {
			t.Fatalf("no address of main.go:%d (lines %v)", line, slices.Sorted(maps.Keys(addrs)))
		}
		var out []string
		for _, fr := range in.Frames(addrs[line][0]) {
			s := fr.Func
			if fr.Line != 0 {
				s += "@" + filepath.Base(fr.File) + ":" + strconv.FormatInt(fr.Line, 10)
			}
			out = append(out, s)
		}
		return strings.Join(out, " < ")
	}
	if got, want := frames(10), "main.sumsq < main.scale@main.go:16 < main.main@main.go:26"; got != want {
		t.Errorf("main.go:10: %s, want %s", got, want)
	}
	if got, want := frames(21), "main.kept"; got != want {
		t.Errorf("main.go:21: %s, want %s", got, want)
	}
	if fr := in.Frames(1); fr != nil {
		t.Errorf("address 1: %v, want none", fr)
	}
}
