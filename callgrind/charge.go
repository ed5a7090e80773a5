package callgrind

import (
	"cmp"
	"maps"
	"math"
	"slices"
)

// Charge is part of a line's exclusive cost, and the lines that led to
// it.
type Charge struct {
	Leaf Line
	// Callers are the frames above Leaf, innermost first: the lines of
	// the program's own code on the way, each with, when it reached the
	// next by way of another module's (the standard library's) function,
	// that function first, at line 0 (its line on the way is not known).
	// Empty when no line of own code leads to Leaf.
	Callers []Line
	Cost    int64
}

// maxOwnFrames bounds a charge's own frames (recursion, deep chains), and
// maxPaths the ways up from one function that are told apart: a lighter
// one ends at the function.
const (
	maxOwnFrames = 24
	maxPaths     = 32
)

// Charges parts each line's exclusive cost among the ways the program's
// own code (the functions own says are its) led to it, so that a
// library's work is a cost of the line that called the library, and a
// function's of the lines that called it.
//
// Callgrind keeps call edges, not stacks: a function's cost is parted
// among the lines that called it in proportion to the inclusive cost of
// each line's calls, up through the functions that are not own until a
// line of own code is reached, and so on up own code's callers. That is
// exact when a function is reached from one line, and a proportion
// otherwise (a function whose calls cost unlike amounts from two lines).
// What no line of own code leads to (a cycle's share that does not
// converge, the runtime's own threads) has no callers. The charges of a
// line add up to its cost.
//
// Functions root says are roots (a benchmark function: what callgrind
// counted is what it ran) are charged to nothing above them: Go's stack
// switches (a goroutine's stack growing) can make callgrind see calls
// that never were, such as a function the root called calling the root.
func (p *Part) Charges(own, root func(fn string) bool) []Charge {
	shares := p.shares(own, root)
	// up[f] are the ways from own function f up its callers.
	up := map[string][]way{}
	busy := map[string]bool{}
	var ways func(f string, depth int) []way
	ways = func(f string, depth int) []way {
		if w, ok := up[f]; ok {
			return w
		}
		if busy[f] || depth >= maxOwnFrames || len(shares[f]) == 0 {
			return []way{{w: 1}} // a recursion, too deep, or a root: f ends it
		}
		busy[f] = true
		var out []way
		for k, v := range shares[f] {
			head := []Line{}
			if k.entry != "" {
				head = append(head, Line{Func: k.entry, File: p.Files[k.entry]})
			}
			head = append(head, k.site)
			for _, above := range ways(k.site.Func, depth+1) {
				out = append(out, way{append(slices.Clip(head), above.frames...), v * above.w})
			}
		}
		busy[f] = false
		out = lightest(out)
		up[f] = out
		return out
	}
	var out []Charge
	lines := slices.SortedFunc(maps.Keys(p.Lines), cmpLine)
	for _, l := range lines {
		c := p.Lines[l]
		if c == 0 {
			continue
		}
		var ws []way
		if own(l.Func) {
			ws = ways(l.Func, 0)
		} else {
			for k, v := range shares[l.Func] {
				head := []Line{}
				if k.entry != "" && k.entry != l.Func {
					head = append(head, Line{Func: k.entry, File: p.Files[k.entry]})
				}
				head = append(head, k.site)
				for _, above := range ways(k.site.Func, 0) {
					ws = append(ws, way{append(slices.Clip(head), above.frames...), v * above.w})
				}
			}
			ws = lightest(ws)
		}
		ws = slices.DeleteFunc(ws, func(w way) bool { return len(w.frames) == 0 })
		slices.SortFunc(ws, func(a, b way) int { return slices.CompareFunc(a.frames, b.frames, cmpLine) })
		out = append(out, splitCost(l, c, ws)...)
	}
	return out
}

// shareKey is an own line that a function's cost is charged to, with the
// function of another module it called on the way.
type shareKey struct {
	entry string // "" when the site called the function itself
	site  Line
}

// shares is, for each function, the part of its cost that each own line
// is charged (Charges).
func (p *Part) shares(own, root func(fn string) bool) map[string]map[shareKey]float64 {
	// Incoming calls by callee, from other functions.
	in := map[string][]Call{}
	for c, v := range p.CallLines {
		if v > 0 && c.From.Func != c.To && (root == nil || !root(c.To)) {
			in[c.To] = append(in[c.To], c)
		}
	}
	for _, cs := range in {
		slices.SortFunc(cs, func(a, b Call) int { return cmpLine(a.From, b.From) })
	}
	// shares[f] is the part of f's cost that each own line is charged
	// (with the function of another module it called on the way), found
	// by iterating to a fixed point: a chain of n functions takes n
	// rounds, a cycle until its shares stop moving.
	shares := map[string]map[shareKey]float64{}
	funcs := callersFirst(in, own)
	for range 1000 {
		moved := false
		for _, f := range funcs {
			var total float64
			for _, c := range in[f] {
				total += float64(p.CallLines[c])
			}
			s := map[shareKey]float64{}
			for _, c := range in[f] {
				w := float64(p.CallLines[c]) / total
				switch {
				case own(c.From.Func) && own(f):
					s[shareKey{"", c.From}] += w
				case own(c.From.Func):
					s[shareKey{f, c.From}] += w
				default:
					for k, v := range shares[c.From.Func] {
						if k.entry == "" { // the caller is own-reached directly
							k.entry = c.From.Func
						}
						s[k] += w * v
					}
				}
			}
			if !sharesEqual(s, shares[f]) {
				moved = true
			}
			shares[f] = s // read by the functions after it this round
		}
		if !moved {
			break
		}
	}
	return shares
}

// splitCost parts line l's cost c among its ways in whole instructions,
// the line's cost kept: each way's floor, the rest to the largest
// remainders; what the ways leave (a cycle's share, a caller no own line
// leads to) stays on the line alone.
func splitCost(l Line, c int64, ws []way) []Charge {
	sign := int64(1)
	if c < 0 {
		sign, c = -1, -c
	}
	parts := make([]int64, len(ws))
	rem := make([]float64, len(ws))
	var given int64
	var sum float64
	for i, w := range ws {
		x := float64(c) * w.w
		parts[i] = int64(math.Floor(x))
		rem[i] = x - float64(parts[i])
		given += parts[i]
		sum += w.w
	}
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
	want := min(c, int64(math.Round(float64(c)*min(sum, 1))))
	for _, i := range order {
		if given >= want {
			break
		}
		parts[i]++
		given++
	}
	var out []Charge
	for i, w := range ws {
		if parts[i] != 0 {
			out = append(out, Charge{Leaf: l, Callers: w.frames, Cost: sign * parts[i]})
		}
	}
	if c-given != 0 {
		out = append(out, Charge{Leaf: l, Cost: sign * (c - given)})
	}
	return out
}

// way is a way up from a line or function: the frames above it,
// innermost first, and the part of its cost that goes that way.
type way struct {
	frames []Line
	w      float64
}

// lightest merges ways of the same frames and keeps the maxPaths
// heaviest, in frame order; those it drops end at their first frame.
func lightest(ws []way) []way {
	// Ways come in map order: sorted by frames and weight first, so that
	// the sums, and so the rounding of Charges, are the same every run.
	merge := func(ws []way) []way {
		slices.SortFunc(ws, func(a, b way) int {
			return cmp.Or(slices.CompareFunc(a.frames, b.frames, cmpLine), cmp.Compare(a.w, b.w))
		})
		var out []way
		for _, w := range ws {
			if n := len(out); n > 0 && slices.Equal(out[n-1].frames, w.frames) {
				out[n-1].w += w.w
				continue
			}
			out = append(out, w)
		}
		return out
	}
	ws = merge(ws)
	if len(ws) > maxPaths {
		slices.SortStableFunc(ws, func(a, b way) int {
			return cmp.Or(cmp.Compare(b.w, a.w), slices.CompareFunc(a.frames, b.frames, cmpLine))
		})
		for i := maxPaths; i < len(ws); i++ {
			ws[i].frames = ws[i].frames[:min(len(ws[i].frames), 1)]
		}
		ws = merge(ws)
	}
	return ws // in frame order: merge sorted it
}

// callersFirst orders the functions in's calls reach (not own) from those
// own lines call, outward, so that a chain's shares settle in one round.
func callersFirst(in map[string][]Call, own func(string) bool) []string {
	outs := map[string][]string{}
	var order, next []string
	seen := map[string]bool{}
	for _, f := range slices.Sorted(maps.Keys(in)) {
		for _, c := range in[f] {
			if own(c.From.Func) && !seen[f] {
				seen[f] = true
				next = append(next, f)
			} else if !own(c.From.Func) {
				outs[c.From.Func] = append(outs[c.From.Func], f)
			}
		}
	}
	for len(next) > 0 {
		order = append(order, next...)
		var more []string
		for _, f := range next {
			for _, g := range outs[f] {
				if !seen[g] {
					seen[g] = true
					more = append(more, g)
				}
			}
		}
		next = more
	}
	// What no own line leads to, last.
	for _, f := range slices.Sorted(maps.Keys(in)) {
		if !seen[f] {
			order = append(order, f)
		}
	}
	return order
}

func sharesEqual[K comparable](a, b map[K]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || math.Abs(v-w) > 1e-12 {
			return false
		}
	}
	return true
}

func cmpLine(a, b Line) int {
	return cmp.Or(cmp.Compare(a.Func, b.Func), cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Addr, b.Addr))
}
