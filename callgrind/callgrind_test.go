package callgrind

import (
	"fmt"
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
	for _, name := range []string{"testdata/pitfalls.out", "testdata/addresses.out"} {
		b, _ := os.ReadFile(name)
		f.Add(b)
	}
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
			// Whatever it parsed, the charges keep each line's cost.
			by := map[Line]int64{}
			for _, c := range p.Charges(func(fn string) bool { return strings.HasPrefix(fn, "main.") }, nil) {
				by[c.Leaf] += c.Cost
			}
			for l, c := range p.Lines {
				if c != 0 && by[l] != c {
					t.Fatalf("line %v: charges add up to %d, cost %d", l, by[l], c)
				}
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
		{"main.f", "/src/a.go", 10, 0}: 5 + 2, // -30 from 40 is line 10 again
		{"main.f", "/src/a.go", 12, 0}: 7,
		{"main.f", "/src/b.go", 40, 0}: 3 + 1,
		{"main.g", "/src/a.go", 20, 0}: 4,
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

// TestCharges: a library's cost is charged to the own lines that called
// it, in proportion to their calls' inclusive costs, down a chain and
// through a cycle; an own function's to the own lines that called it,
// through a library's (a callback) too; each line's charges add up to
// its cost.
func TestCharges(t *testing.T) {
	src := `version: 1
positions: line
events: Ir
fl=(1) /app/main.go
fn=(1) main.run
10 2
cfl=(2) /lib/x.go
cfn=(2) lib.X
calls=1 5
10 100
12 1
cfn=(2)
calls=3 5
12 300
cfn=(7) main.hash
calls=2 40
14 50
fl=(2)
fn=(2)
5 40
cfn=(3) lib.Y
calls=4 20
6 360
cfl=(1)
cfn=(4) main.less
calls=4 20
7 8
fn=(3)
20 300
cfn=(5) lib.A
calls=1 30
21 60
fl=(1)
fn=(4)
30 8
fn=(7)
40 50
fl=(2)
fn=(5)
30 50
cfn=(6) lib.B
calls=1 40
31 10
fn=(6)
40 10
cfn=(5)
calls=1 30
41 5
`
	parts, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	p := parts[0]
	own := func(fn string) bool { return strings.HasPrefix(p.Files[fn], "/app/") }
	got := map[[2]string]int64{}
	byLeaf := map[Line]int64{}
	for _, c := range p.Charges(own, nil) {
		var callers []string
		for _, l := range c.Callers {
			callers = append(callers, fmt.Sprintf("%s:%d", l.Func, l.Line))
		}
		got[[2]string{fmt.Sprintf("%s:%d", c.Leaf.Func, c.Leaf.Line), strings.Join(callers, " < ")}] += c.Cost
		byLeaf[c.Leaf] += c.Cost
	}
	if !maps.Equal(byLeaf, p.Lines) {
		t.Errorf("charges add up to %v, lines %v", byLeaf, p.Lines)
	}
	want := map[[2]string]int64{
		{"main.run:10", ""}:                       2,
		{"main.run:12", ""}:                       1,
		{"main.hash:40", "main.run:14"}:           50,
		{"lib.X:5", "main.run:10"}:                10,
		{"lib.X:5", "main.run:12"}:                30,
		{"lib.Y:20", "lib.X:0 < main.run:10"}:     75,
		{"lib.Y:20", "lib.X:0 < main.run:12"}:     225,
		{"main.less:30", "lib.X:0 < main.run:10"}: 2,
		{"main.less:30", "lib.X:0 < main.run:12"}: 6,
		{"lib.A:30", "lib.X:0 < main.run:10"}:     13, // 50 x 1/4, rounded up by its remainder
		{"lib.A:30", "lib.X:0 < main.run:12"}:     37,
		{"lib.B:40", "lib.X:0 < main.run:10"}:     3, // 10 x 1/4: 2.5 rounds to 3 (equal remainders: frame order)
		{"lib.B:40", "lib.X:0 < main.run:12"}:     7,
	}
	if !maps.Equal(got, want) {
		t.Errorf("charges\n%v\nwant\n%v", got, want)
	}
}

// TestAddresses: with "positions: instr line" each cost line has an
// address and a line, each relative to its own last value; a calls=
// line's target address is relative to the last address without moving
// it (the call's own position after it is the caller's).
func TestAddresses(t *testing.T) {
	src := `version: 1
positions: instr line
events: Ir
fl=(1) /app/main.go
fn=(1) main.run
0x1000 7 1
+4 * 2
cfn=(2) lib.X
calls=1 -2048 +3
* +1 100
+5 * 3
`
	parts, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	p := parts[0]
	want := map[Line]int64{
		{"main.run", "/app/main.go", 7, 0x1000}: 1,
		{"main.run", "/app/main.go", 7, 0x1004}: 2,
		{"main.run", "/app/main.go", 8, 0x1009}: 3,
	}
	if !maps.Equal(p.Lines, want) {
		t.Errorf("lines %v, want %v", p.Lines, want)
	}
	call := Call{From: Line{"main.run", "/app/main.go", 8, 0x1004}, To: "lib.X", Target: 0x804}
	if p.CallLines[call] != 100 || len(p.CallLines) != 1 {
		t.Errorf("calls %v, want %v: 100", p.CallLines, call)
	}
}
