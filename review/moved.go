package review

// The stack whose count changed. A line the head left alone (or work with
// no line of the repository's: a router's matching before the handler
// runs) can reach a module along many chains of functions; when go.mod
// moved that module, the review names the chain whose count moved, not
// the heaviest. Chains are compared by what they ask the standard
// library for (the library's frames below the innermost frame of a
// module's code), or by that frame's function when it allocates itself:
// a module that moves a call from one of its functions to another
// (setPathValue's SetPathValue, now in routeHTTP) moved nothing, and
// nets to zero; a new strings.Join under RoutePattern is the change.

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// chainStack is what runs along one chain of functions: its counts (the
// sample types read, the first two), its heaviest stack (outermost
// first) and its functions, folded as allocdiff folds them.
type chainStack struct {
	v    [2]float64
	path []string
	fns  []string
	w    int64
}

// addChain adds a sample's counts to chain m[signature of fns]; path
// gives its stack, formatted only when it is the chain's heaviest yet.
func addChain(m map[string]*chainStack, fns []string, v [2]float64, path func() []string) {
	sig := strings.Join(fns, ";")
	c := m[sig]
	if c == nil {
		c = &chainStack{fns: fns}
		m[sig] = c
	}
	c.v = add(c.v, v, 1)
	if w := int64(v[0]); w > c.w || c.path == nil {
		c.w, c.path = w, path()
	}
}

// addBelow adds a sample's counts to its site's chain of functions below
// it: the frames from the leaf up to the innermost frame of the site's
// function and line, outermost first.
func (sc *siteCounts) addBelow(k siteKey, s *profile.Sample, prefix string, v [2]float64) {
	var fns []string
	stop := false
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function == nil {
				continue
			}
			if l.Function.Name == k.fn && int(l.Line) == k.line {
				stop = true
				break
			}
			fns = append(fns, profkey.FuncKey(l.Function.Name, profkey.DefaultFolds))
		}
		if stop {
			break
		}
	}
	slices.Reverse(fns)
	if sc.below[k] == nil {
		sc.below[k] = map[string]*chainStack{}
	}
	addChain(sc.below[k], fns, v, func() []string { return stackPath(s, prefix) })
}

// addUnowned adds a sample with no own frame, by its chain of functions.
func (sc *siteCounts) addUnowned(s *profile.Sample, v [2]float64) {
	var fns []string
	for _, loc := range slices.Backward(s.Location) {
		for _, l := range slices.Backward(loc.Line) {
			if l.Function != nil {
				fns = append(fns, profkey.FuncKey(l.Function.Name, profkey.DefaultFolds))
			}
		}
	}
	addChain(sc.unowned, fns, v, func() []string {
		var path []string
		for _, loc := range slices.Backward(s.Location) {
			for _, l := range slices.Backward(loc.Line) {
				if l.Function != nil {
					path = append(path, fmt.Sprintf("%s (%s:%d)", l.Function.Name, filepath.Base(l.Function.Filename), l.Line))
				}
			}
		}
		return path
	})
}

// chainKey is what a chain is compared by between two versions: the
// standard library's frames below its innermost frame of other code, or
// that frame's function when it is the leaf (the whole chain when all of
// it is the library's).
func chainKey(fns []string) string {
	m := -1
	for i, fn := range fns {
		if !profkey.StdFunc(fn) {
			m = i
		}
	}
	if m >= 0 && m == len(fns)-1 {
		return fns[m]
	}
	return strings.Join(fns[m+1:], ";")
}

// chainMove is a chain that moved between two arms: its change per
// request (op), its stack in the head (the base's when gone) and the
// base's (nil when new).
type chainMove struct {
	v          [2]float64
	head, base []string
}

// chainMoves are the keys whose counts per request moved between b and a
// (chains by signature, each arm's requests bn and an), largest first;
// each with the stacks of the chain in it that moved most the same way.
func chainMoves(b, a map[string]*chainStack, bn, an int64) []chainMove {
	if bn == 0 || an == 0 {
		return nil
	}
	type sigMove struct {
		sig string
		v   [2]float64
	}
	byKey := map[string][]sigMove{}
	for _, sig := range slices.Sorted(maps.Keys(merge(b, a))) {
		var v [2]float64
		var fns []string
		if x := a[sig]; x != nil {
			v, fns = add(v, [2]float64{x.v[0] / float64(an), x.v[1] / float64(an)}, 1), x.fns
		}
		if x := b[sig]; x != nil {
			v, fns = add(v, [2]float64{x.v[0] / float64(bn), x.v[1] / float64(bn)}, -1), x.fns
		}
		k := chainKey(fns)
		byKey[k] = append(byKey[k], sigMove{sig, v})
	}
	var out []chainMove
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		var m chainMove
		for _, s := range byKey[k] {
			m.v = add(m.v, s.v, 1)
		}
		if math.Abs(m.v[0]) < 0.005 && math.Abs(m.v[1]) < 0.5 {
			continue
		}
		// The chain that moved most the way the key did.
		ms := byKey[k]
		top := slices.MaxFunc(ms, func(x, y sigMove) int {
			return cmp.Or(cmp.Compare(x.v[0]*sign(m.v[0]), y.v[0]*sign(m.v[0])), cmp.Compare(x.v[1]*sign(m.v[1]), y.v[1]*sign(m.v[1])), strings.Compare(y.sig, x.sig))
		})
		if x := a[top.sig]; x != nil {
			m.head = x.path
		}
		if x := b[top.sig]; x != nil {
			m.base = x.path
			if m.head == nil {
				m.head = x.path
			}
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(x, y chainMove) int { return cmp.Compare(math.Abs(y.v[0]), math.Abs(x.v[0])) })
	return out
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

// merge is the union of two maps' keys.
func merge(b, a map[string]*chainStack) map[string]bool {
	out := map[string]bool{}
	for s := range b {
		out[s] = true
	}
	for s := range a {
		out[s] = true
	}
	return out
}

// movedStack is, between a base site and the head site it became, the
// chain below that moved most: its head stack and its base stack.
func movedStack(before, after siteCounts, bk, hk siteKey) (head, base []string) {
	ms := chainMoves(before.below[bk], after.below[hk], before.requests, after.requests)
	if len(ms) == 0 {
		return nil, nil
	}
	return ms[0].head, ms[0].base
}

// unownedChanges are the chains with no own frame whose counts per
// request moved, each as a line change with no line.
func unownedChanges(before, after siteCounts) []lineChange {
	var out []lineChange
	for _, m := range chainMoves(before.unowned, after.unowned, before.requests, after.requests) {
		out = append(out, lineChange{v: m.v, path: m.head, moved: m.head, movedBase: m.base})
	}
	return out
}

// unownedDeps gives each go.mod change the work with no frame of the
// repository's (a router's matching before the handler runs) that it
// moved, and returns how much that was (its first figure). Instructions'
// stacks reach own code from their roots: theirs have no such work.
func (r *Result) unownedDeps(deps map[schema.GoModChange]*depChange, before, after siteCounts, whole float64, kind string) float64 {
	if len(r.Modules) == 0 || kind == "instructions" {
		return 0
	}
	var moved float64
	for _, lc := range unownedChanges(before, after) {
		c, frame, ok := causeBelow(lc.path, -1, r.Modules, lc.movedBase)
		if !ok {
			continue
		}
		d := deps[c]
		if d == nil {
			d = &depChange{c: c, modCache: r.modCache, of: whole}
			deps[c] = d
		}
		d.add(lc, frame)
		moved += lc.v[0]
	}
	return moved
}
