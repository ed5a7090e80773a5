package callgrind

import (
	"maps"
	"os"
	"strings"
	"testing"
)

// Each pitfall of testdata/pitfalls.out, checked by hand: part 1 holds
// main.main 150 (10: 100, +2: 50) and runtime.startup 950 (the 900 after
// calls= is inclusive, not main.main's own); part 2 main.handler 1500
// (* repeats the position), runtime.memmove 1200, main.main 300; the totals:
// lines are not costs; part 3 is the exit dump.
func TestPitfalls(t *testing.T) {
	parts := parseFile(t, "testdata/pitfalls.out")
	if len(parts) != 3 {
		t.Fatalf("%d parts, want 3", len(parts))
	}
	want := []map[string]int64{
		{"main.main": 150, "runtime.startup": 950},
		{"main.handler": 1500, "runtime.memmove": 1200, "main.main": 300},
		{"main.main": 7},
	}
	for i, w := range want {
		p := parts[i]
		if len(p.Self) != len(w) {
			t.Errorf("part %d: %v, want %v", i+1, p.Self, w)
		}
		for fn, c := range w {
			if p.Self[fn] != c {
				t.Errorf("part %d: %s = %d, want %d", i+1, fn, p.Self[fn], c)
			}
		}
	}
	if parts[0].Total != 1100 || parts[0].Totals != 1100 || parts[1].Total != 3000 {
		t.Errorf("totals: part 1 %d (file says %d), part 2 %d", parts[0].Total, parts[0].Totals, parts[1].Total)
	}
	if c := parts[0].Calls[[2]string{"main.main", "runtime.startup"}]; c != 900 {
		t.Errorf("inclusive call cost %d, want 900", c)
	}
	if parts[2].Trigger != "Program termination" || !strings.HasPrefix(parts[1].Trigger, "Client Request") {
		t.Errorf("triggers %q %q", parts[1].Trigger, parts[2].Trigger)
	}
	if top := parts[1].Top(); top[0].Func != "main.handler" || !MemmoveClass(top[1].Func) {
		t.Errorf("top %v", top)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"fn=(1)\n10 5\n",      // id used before it is defined
		"events: Ir\n10 5\n",  // cost before fn=
		"fn=(1) f\nxx 5\n",    // bad position
		"fn=(1) f\n10 five\n", // bad cost
		"part: x\n",           // bad part number
		"",                    // nothing
	} {
		if _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("Parse(%q): no error", in)
		}
	}
}

func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile("testdata/pitfalls.out")
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		parts, err := Parse(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		for _, p := range parts {
			var s int64
			for _, c := range p.Self {
				s += c
			}
			if s != p.Total {
				t.Fatalf("part %d: self sums to %d, total %d", p.Number, s, p.Total)
			}
		}
	})
}

// A recursive function's levels (main.walk, main.walk'2) are one function:
// its own cost is both levels', and its inclusive cost counts the
// recursion once.
func TestRecursionLevels(t *testing.T) {
	p := parseFile(t, "testdata/recursion.out")[0]
	if p.Self["main.walk"] != 160 || len(p.Self) != 2 || p.Self["main.main"] != 1 {
		t.Errorf("self %v, want main.walk 160 and main.main 1", p.Self)
	}
	if got := p.Inclusive("main.walk"); got != 160 {
		t.Errorf("inclusive main.walk %d, want 160", got)
	}
	if got := p.Inclusive("main.main"); got != 161 {
		t.Errorf("inclusive main.main %d, want 161", got)
	}
	for _, n := range []string{"main.walk'2", "f'x", "'3", "g'"} {
		want := n
		if n == "main.walk'2" {
			want = "main.walk"
		}
		if baseName(n) != want {
			t.Errorf("baseName(%q) = %q", n, baseName(n))
		}
	}
}

func parseFile(t *testing.T, path string) []*Part {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parts, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// TestLines: each cost line's source line, absolute or relative, in the
// function's file or in the file of code inlined into it (fi=, fe=), adds
// up to the function's exclusive cost.
func TestLines(t *testing.T) {
	src := `version: 1
positions: line
events: Ir
fl=(1) /src/a.go
fn=(1) main.f
10 5
+2 7
fi=(2) /src/b.go
40 3
* 1
fe=(1)
-30 2
fn=(2) main.g
20 4
calls=1 10
21 100
`
	parts, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	p := parts[0]
	want := map[Line]int64{
		{"main.f", "/src/a.go", 10}: 5 + 2, // -30 from 40 is line 10 again
		{"main.f", "/src/a.go", 12}: 7,
		{"main.f", "/src/b.go", 40}: 3 + 1,
		{"main.g", "/src/a.go", 20}: 4,
	}
	if !maps.Equal(p.Lines, want) {
		t.Errorf("lines %v, want %v", p.Lines, want)
	}
	var sum int64
	for _, v := range p.Lines {
		sum += v
	}
	if sum != p.Total || p.Self["main.f"] != 18 {
		t.Errorf("lines add up to %d, total %d; main.f %d, want 18", sum, p.Total, p.Self["main.f"])
	}
}
