package probe

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/profkey"
)

// stackFuncs is a sample's functions, innermost first, inlined frames
// included, as go tool pprof -traces lists them.
func stackFuncs(s *profile.Sample) []string {
	var out []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			out = append(out, l.Function.Name)
		}
	}
	return out
}

// TestWholeStacks runs /deep, whose allocation and copy sit 25 and 200
// calls of main.deep below the handler. The 25-deep stacks are kept whole,
// down to net/http.(*conn).serve, where the runtime's own profiles end them
// (the go statement's wrapper and runtime.goexit left out); the 200-deep ones are
// cut at 128 PCs, as the runtime's own profiles cut them, and end in the
// wire.TruncatedFunc frame.
func TestWholeStacks(t *testing.T) {
	skipShort(t)
	m := runTarget(t, "/deep?frames=25,200")
	copies, err := readProfile(filepath.Join(m.dir, "copies.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*profile.Profile{"allocs": m.allocs, "copies": copies} {
		n := requestsComment(t, p)
		found := map[bool]bool{}
		for _, s := range p.Sample {
			funcs := stackFuncs(s)
			if !slices.Contains(funcs, "main.deepLeaf") || s.Value[0] == 0 {
				continue
			}
			deep := 0
			for _, f := range funcs {
				if f == "main.deep" {
					deep++
				}
			}
			cut := funcs[len(funcs)-1] == wire.TruncatedFunc
			found[cut] = true
			t.Logf("%s: %d frames, %d of main.deep, cut %v: %d for %d requests", name, len(funcs), deep, cut, s.Value[0], n)
			if s.Value[0] != n {
				t.Errorf("%s: the stack with %d main.deep frames counts %d for %d requests, want one per request", name, deep, s.Value[0], n)
			}
			switch {
			case !cut:
				if deep != 26 || funcs[len(funcs)-1] != "net/http.(*conn).serve" {
					t.Errorf("%s: a whole stack has %d main.deep frames (want 26), ends in %s:\n%s", name, deep, funcs[len(funcs)-1], strings.Join(funcs, "\n"))
				}
			default:
				// 128 PCs are kept: the copy's from memmove's caller
				// (main.copyN), the allocation's from mallocgc's caller,
				// runtime.makeslice, which the profile drops as runtime
				// /pprof's heap profile does.
				want := map[string]int{"allocs": 128 - 1, "copies": 128}[name]
				if got := len(s.Location) - 1; got != want || slices.Contains(funcs, "net/http.(*conn).serve") {
					t.Errorf("%s: a cut stack has %d locations before the mark, want %d:\n%s", name, got, want, strings.Join(funcs, "\n"))
				}
			}
		}
		if !found[true] || !found[false] {
			t.Errorf("%s: whole stack found %v, cut stack found %v", name, found[false], found[true])
		}
	}
}

// stackTotals sums two sample values by whole stack (function names,
// innermost first), with generic shapes spelled [...].
func stackTotals(p *profile.Profile, vi ...int) map[string][2]int64 {
	m := map[string][2]int64{}
	for _, s := range p.Sample {
		// Nested brackets too: Go 1.27's runtime/pprof spells
		// slices.Grow[go.shape.[]uint8,go.shape.uint8].
		fs := stackFuncs(s)
		for i, f := range fs {
			fs[i] = profkey.FuncKey(f, profkey.Folds{Generics: true})
		}
		k := strings.Join(fs, ";")
		v := m[k]
		v[0] += s.Value[vi[0]]
		v[1] += s.Value[vi[1]]
		m[k] = v
	}
	return m
}
