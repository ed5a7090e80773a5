package review

// The review's annotations: the source lines, in the head revision, whose
// exact per-request (per-op) counts grew, found in the innermost frame of
// the repository's own code of each sample.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// siteKey is a line of the repository's code.
type siteKey struct {
	file string // relative to the root
	line int
	fn   string
}

// siteCounts are one arm's values by site, summed over its rounds, and
// the requests (ops) they came from.
type siteCounts struct {
	v        map[siteKey][2]float64
	requests int64
	// path is each site's heaviest stack, from the repository's outermost
	// frame (the handler, the benchmark) down to the allocating frame.
	path   map[siteKey][]string
	weight map[siteKey]int64
	// below are each site's counts by what runs below it (the functions
	// of the frames under the site's, folded: their lines move between
	// versions of a module), each with its heaviest stack: the stack whose
	// count changed is found there, not only the heaviest.
	below map[siteKey]map[string]*chainStack
	// unowned are the samples with no frame of the repository's own code
	// (a dependency's work that a request runs before or after the
	// handler: a router's matching, a middleware), by chain of
	// functions: a go.mod change that moved them is named on go.mod.
	unowned map[string]*chainStack
	// total is every sample's first value, own code's or not: the
	// item's whole figure, that a line's change is a part of.
	total float64
}

// addAnnotations annotates the lines behind each count of it that
// changed: each line's net change in the head (its count less the base's
// that follows it through the line map), growth a warning, or an error
// when its metric failed its gate, a decrease a notice.
func (r *Result) addAnnotations(ctx context.Context, root string, it *schema.ReviewItem, ab *probe.ABResult) {
	per := "req"
	if it.Kind == "benchmarks" {
		per = "op"
	}
	type want struct{ failed bool }
	todo := map[string]*want{} // profile -> whether a metric of it failed its gate
	// A request file's routes are annotated one by one, not as the mix.
	routes := slices.ContainsFunc(it.Changes, func(c schema.ReviewChange) bool { return c.Subject != it.Route })
	for _, c := range it.Changes {
		changed := c.Verdict == "regression" || c.Verdict == "improvement"
		if c.Profile == "" || !changed || !IsCount(c.Metric) && !isInstructions(c.Metric) || routes && it.Kind == "server" && c.Subject == it.Route {
			continue
		}
		w := todo[c.Profile]
		if w == nil {
			w = &want{}
			todo[c.Profile] = w
		}
		w.failed = w.failed || c.Failed
	}
	lines := &lineMaps{ctx: ctx, root: root, base: r.Base["commit"], head: r.Head["commit"], m: map[string][]hunk{}}
	for _, prof := range sortedKeys(todo) {
		r.annotateProfile(lines, it, ab, prof, per, todo[prof].failed)
	}
	slices.SortFunc(r.Annotations, func(a, b schema.Annotation) int {
		if a.Level != b.Level {
			return levelOrder[a.Level] - levelOrder[b.Level] // errors first
		}
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Subject+a.Metric, b.Subject+b.Metric)
	})
}

// annotateProfile annotates the lines behind profile prof of item it:
// failed says that a metric of it failed its gate.
func (r *Result) annotateProfile(lines *lineMaps, it *schema.ReviewItem, ab *probe.ABResult, prof, per string, failed bool) {
	kind := prof[strings.LastIndex(prof, " ")+1:] // allocs, copies, retained, instructions or compiler_copies
	subject := strings.TrimSpace(strings.TrimSuffix(prof, kind))
	if subject == "" {
		subject = it.Route
	}
	// Instructions are read on the innermost changed line of a
	// sample's own frames when it has one (what runs below a changed
	// line is its cost, as the line's calls' inclusive cost), else on
	// its innermost own line; the other kinds on the innermost.
	var baseChanged, headChanged func(string, int) bool
	if kind == "instructions" {
		baseChanged = func(file string, line int) bool { return baseHunk(lines.hunks(file), line) >= 0 }
		headChanged = func(file string, line int) bool { return headHunk(lines.hunks(file), line) >= 0 }
	}
	before := readKind(ab.Profiles["before"][prof], ab.Worktrees["before"], kind, baseChanged)
	after := readKind(ab.Profiles["after"][prof], ab.Worktrees["after"], kind, headChanged)
	if before.requests == 0 || after.requests == 0 {
		return
	}
	deps := map[schema.GoModChange]*depChange{}
	whole := before.total / float64(before.requests)
	// Instructions' stacks are whole (own code's callers are in
	// them): a line the head left alone that runs more because a
	// changed line calls it more is that line's change.
	lcs := lines.causeLines(lines.netChanges(before, after))
	// Instructions move on lines a change left alone when the
	// compiler lays out their function anew around it (a changed
	// function inlined there: registers, spills): with a changed line
	// that moved, those are its remainder, said beside it, not lines
	// of their own.
	changedMoved := kind == "instructions" && slices.ContainsFunc(lcs, func(lc lineChange) bool {
		return lc.changed && math.Abs(lc.v[0]) >= 0.5 && math.Abs(lc.v[0]) >= insLineShare*whole
	})
	// The remainder is the item's change less its changed lines' (and
	// what go.mod's changes are given): lines left alone, and code
	// that is no line of the repository's (inlined into its functions
	// from the standard library, testing's loop).
	rest := after.total/float64(after.requests) - whole
	for _, lc := range lcs {
		if lc.changed {
			rest -= lc.v[0]
		}
	}
	largest := -1 // the annotation of this profile with the largest change
	for _, lc := range lcs {
		lc.of = whole
		// A line the head left alone, whose change is in a module
		// (or the toolchain) go.mod moved: go.mod's line is the
		// cause, and this line the path to it.
		if c, frame, ok := moduleCause(lc, r.Modules, r.codeChanged); ok {
			d := deps[c]
			if d == nil {
				d = &depChange{c: c, modCache: r.modCache, of: whole}
				deps[c] = d
			}
			d.add(lc, frame)
			rest -= lc.v[0]
			continue
		}
		if changedMoved && !lc.changed {
			continue // in the remainder
		}
		if a, ok := annotation(lc, kind, per, subject, failed); ok {
			a.Item = it.Name
			base := lc.base
			verb := map[string]string{"allocs": "allocates", "copies": "copies", "retained": "keeps it", "instructions": "runs more", "compiler_copies": "copies"}[kind]
			switch {
			case lc.alloc != 0 && !lc.own:
				a.AllocLine, base = lc.alloc, lc.allocBase
				a.Message += fmt.Sprintf("; at %s:%d, a line this change left alone, which %s because of this one", lc.k.file, lc.alloc, verb)
			case lc.alloc != 0:
				a.Message += fmt.Sprintf("; with %s:%d, a line this change left alone, which %s because of this one", lc.k.file, lc.alloc, verb)
			}
			if largest < 0 || math.Abs(a.Delta) > math.Abs(r.Annotations[largest].Delta) {
				largest = len(r.Annotations)
			}
			r.Annotations = append(r.Annotations, a)
			if r.baseLines == nil {
				r.baseLines, r.headLines, r.changedLines, r.causedLines = map[string][]int{}, map[string][]int{}, map[string]bool{}, map[string]lineChange{}
			}
			r.baseLines[annKey(a)], r.headLines[annKey(a)], r.changedLines[annKey(a)] = base, lc.heads, lc.changed
			if lc.alloc != 0 && lc.own {
				r.causedLines[annKey(a)] = lc
			}
		}
	}
	rest -= r.unownedDeps(deps, before, after, whole, kind)
	if changedMoved && largest >= 0 && math.Abs(rest) >= 0.5 {
		foldRemainder(&r.Annotations[largest], rest, whole, per)
	}
	r.addDeps(deps, it.Name, prof, per, subject, failed)
}

// addDeps annotates go.mod's lines with what each change moved in item's
// profile prof, and keeps, for the allocations, what each moved
// (depMoved: review.md's go.mod table).
func (r *Result) addDeps(deps map[schema.GoModChange]*depChange, item, prof, per, subject string, failed bool) {
	kind := prof[strings.LastIndex(prof, " ")+1:]
	if kind == "allocs" {
		if r.depMoved == nil {
			r.depMoved = map[string]map[schema.GoModChange]float64{}
		}
		moved := map[schema.GoModChange]float64{}
		for c, d := range deps {
			moved[c] = d.v[0]
		}
		r.depMoved[depKey(item, prof)] = moved
	}
	for _, c := range slices.SortedFunc(maps.Keys(deps), func(a, b schema.GoModChange) int { return strings.Compare(a.File+a.Path, b.File+b.Path) }) {
		if a, ok := deps[c].annotation(kind, per, subject, failed); ok {
			a.Item = item
			r.Annotations = append(r.Annotations, a)
		}
	}
}

var levelOrder = map[string]int{"error": 0, "warning": 1, "notice": 2}

// readKind reads one profile kind's sites: allocations by count and
// requested bytes (the bytes the code asked for: size-class bytes move
// when the tiny allocator's 16-byte blocks are opened by another site),
// copies by bytes, memory left live by objects and bytes.
func readKind(files []string, worktree, kind string, changed func(file string, line int) bool) siteCounts {
	switch kind {
	case "allocs":
		// What follows the GC's cadence is judged apart (judge.go), not
		// put on lines.
		sc := readSites(files, worktree, []string{"alloc_objects", "requested_space"}, cadence, nil)
		if sc.requests == 0 { // the heap profile has no requested bytes
			sc = readSites(files, worktree, []string{"alloc_objects", "alloc_space"}, cadence, nil)
		}
		return sc
	case "copies":
		// Bytes, not a count: a map's growth is the GC's cadence's.
		return readSites(files, worktree, []string{"copied_bytes"}, func(s *profile.Sample, _ float64) bool { return cadence(s, 0) }, nil)
	case "retained":
		return readSites(files, worktree, []string{"inuse_objects", "inuse_space"}, func(s *profile.Sample, _ float64) bool { return cadence(s, 0) }, nil)
	case "instructions":
		sc := readSites(files, worktree, []string{"instructions"}, nil, changed)
		return sc
	case "compiler_copies":
		// On the innermost own line, as memmove's copies: the line that
		// assigns the struct is the compiler's copy.
		return readSites(files, worktree, []string{"copied_bytes"}, nil, nil)
	}
	return siteCounts{}
}

// annotation is a line's net change as an annotation, when it is one:
// at least 0.005 allocations or half a byte per request (op), growth or
// decrease.
func annotation(lc lineChange, kind, per, subject string, failed bool) (schema.Annotation, bool) {
	g, k := lc.v, lc.k
	a := schema.Annotation{File: k.file, Line: k.line, Func: k.fn, Subject: subject, Delta: g[0], Stack: lc.path}
	grew := g[0] > 0 || g[0] == 0 && g[1] > 0
	where := subject
	if lc.from != "" {
		where += " (" + lc.from + ")"
	}
	verb := "grew"
	if !grew {
		verb = "fell"
	}
	switch {
	case kind == "retained" && math.Abs(g[1]) >= 0.5:
		grew = g[1] > 0
		a.Metric, a.Bytes = "retained-B/"+per, g[1]
		a.Message = fmt.Sprintf("%s B/%s (%+.2f objects) left live in %s", signedNum(g[1]), per, g[0], where)
		a.Title = "perfspy: memory left live " + verbOf(grew) + " in " + shortFunc(k.fn)
	case kind == "compiler_copies" && math.Abs(g[0]) >= 0.5:
		a.Metric = "compiler-copied-B/" + per
		a.Message = fmt.Sprintf("%s B/%s copied by the compiler's own moves (a struct or array assigned by value, which memmove never sees) in %s", signedNum(g[0]), per, where)
		a.Title = "perfspy: bytes the compiler copies " + verb + " in " + shortFunc(k.fn)
	case kind == "copies" && math.Abs(g[0]) >= 0.5:
		a.Metric = "copied-B/" + per
		a.Message = fmt.Sprintf("%s copied B/%s in %s", signedNum(g[0]), per, where)
		a.Title = "perfspy: bytes copied " + verb + " in " + shortFunc(k.fn)
	case kind == "instructions" && math.Abs(g[0]) >= 0.5 && (lc.of <= 0 || math.Abs(g[0]) >= insLineShare*lc.of):
		a.Metric = "instructions/" + per
		pct := ""
		if lc.of > 0 {
			pct = fmt.Sprintf(" (%+.1f%%)", 100*g[0]/lc.of)
		}
		a.Message = fmt.Sprintf("%s instructions/%s%s in %s", signedCount(g[0]), per, pct, where)
		a.Title = "perfspy: instructions " + verb + " in " + shortFunc(k.fn)
	case kind == "allocs" && (math.Abs(g[0]) >= 0.005 || math.Abs(g[1]) >= 0.5):
		a.Metric, a.Bytes = "allocs/"+per, g[1]
		a.Message = fmt.Sprintf("%s allocs/%s (%s B asked for) in %s", signedFixed(g[0]), per, signedNum(g[1]), where)
		a.Title = "perfspy: allocations " + verb + " in " + shortFunc(k.fn)
	default:
		return a, false
	}
	switch {
	case !grew:
		a.Level = "notice"
	case failed:
		a.Level = "error"
	default:
		a.Level = "warning"
	}
	return a, true
}

// foldRemainder gives a, the largest changed line's annotation of an
// item, the rest of the item's change (rest per request or op; whole is
// the item's figure in the base): the annotation says the net, as the
// item's figure does, and both parts.
func foldRemainder(a *schema.Annotation, rest, whole float64, per string) {
	// The remainder is the change's too: the annotation says the
	// net, as the benchmark's figure does, and both parts.
	on := a.Delta
	a.Delta += rest
	_, tail, _ := strings.Cut(a.Message, " in ")
	where, more, _ := strings.Cut(tail, "; ")
	if more != "" {
		more = "; " + more
	}
	pct := ""
	if whole > 0 {
		pct = fmt.Sprintf(" (%+.1f%%)", 100*a.Delta/whole)
	}
	a.Message = fmt.Sprintf("%s instructions/%s%s in %s, net of %s on this line and %s elsewhere (lines this change left alone and code inlined from other packages, which the compiler laid out anew around it or which runs less because of it)%s",
		signedCount(a.Delta), per, pct, where, signedCount(on), signedCount(rest), more)
	if (a.Delta > 0) != (on > 0) {
		a.Title = strings.Replace(a.Title, verbOf(on > 0), verbOf(a.Delta > 0), 1)
		if a.Delta <= 0 {
			a.Level = "notice"
		}
	}
}

// insLineShare is the least part of an item's instructions a line's
// change must be to be annotated: half the spread an instructions figure
// is said to repeat to (probe's insSpread), so that no line is
// annotated with what two runs of one build may differ by.
const insLineShare = 0.0005

// isInstructions says whether a metric is callgrind's instructions.
func isInstructions(metric string) bool { return strings.HasPrefix(metric, "instructions/") }

// signedCount is a count with its sign, rounded to a whole, its
// thousands grouped: +1,840.
func signedCount(v float64) string {
	n := int64(math.Round(math.Abs(v)))
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if v < 0 {
		return "-" + b.String()
	}
	return "+" + b.String()
}

func verbOf(grew bool) string {
	if grew {
		return "grew"
	}
	return "fell"
}

// signedFixed is v with its sign and two decimals.
func signedFixed(v float64) string {
	if math.Abs(v) < 0.005 {
		return "+0.00"
	}
	return fmt.Sprintf("%+.2f", v)
}

// lineChange is one line's net change in the head, per request (op).
type lineChange struct {
	k    siteKey
	v    [2]float64
	from string // for lines the head changed: what the figure nets
	// base are the base's lines it is compared with (none for a new
	// line): where the compiler's diagnostics of the base are read.
	base []int
	path []string // the head's heaviest stack to it (else the base's)
	// changed says that the head changed the line (its hunk's lines are
	// netted as one): a line the head left alone moved because of what
	// it calls. heads are its hunk's lines in the head.
	changed bool
	heads   []int
	// moved is, for a line the head left alone, the stack below it whose
	// count changed most (in the head, else the base's), and movedBase
	// the base's stack of the same functions: where a module's change
	// is named, at its line in each version.
	moved, movedBase []string
	// alloc is the line that allocates, when the change is on the
	// changed line that caused it (causeLines), and allocBase the base
	// lines it came from.
	alloc     int
	allocBase []int
	// own says that the changed line's own figures changed too: the
	// change is its and alloc's.
	own bool
	// of is the item's whole figure per request (op) in the base, that
	// the change is a part of (instructions' percentage).
	of float64
}

// netted says what a hunk's figure nets, when the base's lines had a
// count.
func netted(h hunk, counted bool) string {
	switch {
	case !counted:
		return ""
	case h.d == 0:
		return fmt.Sprintf("base lines %s, removed", span(h.a, h.b))
	}
	return fmt.Sprintf("net of head lines %s, which replaced base lines %s", span(h.c, h.d), span(h.a, h.b))
}

// netChanges are the lines whose figures changed between before and
// after, per request (op). A line the head left alone is compared with
// itself, moved by the lines added or removed above it. Lines the head
// changed are compared as one with the base lines they replaced, in the
// same function (the old line's count follows it: a make(64) that became
// make(16) on the next line is -48 B, not +16 B); the change is put on
// the changed line that allocates most in the head, or on the hunk's
// first line when none does.
func (lm *lineMaps) netChanges(before, after siteCounts) []lineChange {
	type groupKey struct {
		file string
		h    int
		fn   string
	}
	type group struct {
		head map[int][2]float64
		base [2]float64
		hunk hunk
	}
	plain := map[siteKey][2]float64{}
	groups := map[groupKey]*group{}
	get := func(k groupKey, h hunk) *group {
		g := groups[k]
		if g == nil {
			g = &group{head: map[int][2]float64{}, hunk: h}
			groups[k] = g
		}
		return g
	}
	for k, v := range after.v {
		per := [2]float64{v[0] / float64(after.requests), v[1] / float64(after.requests)}
		hs := lm.hunks(k.file)
		if i := headHunk(hs, k.line); i >= 0 {
			g := get(groupKey{k.file, i, k.fn}, hs[i])
			g.head[k.line] = add(g.head[k.line], per, 1)
			continue
		}
		plain[k] = add(plain[k], per, 1)
	}
	for k, v := range before.v {
		per := [2]float64{v[0] / float64(before.requests), v[1] / float64(before.requests)}
		hs := lm.hunks(k.file)
		if i := baseHunk(hs, k.line); i >= 0 {
			g := get(groupKey{k.file, i, k.fn}, hs[i])
			g.base = add(g.base, per, 1)
			continue
		}
		line, _ := mapLine(hs, k.line)
		hk := siteKey{k.file, line, k.fn}
		plain[hk] = add(plain[hk], per, -1)
	}
	var out []lineChange
	pathOf := func(k siteKey, bk []siteKey) []string {
		if p := after.path[k]; p != nil {
			return p
		}
		for _, b := range bk {
			if p := before.path[b]; p != nil {
				return p
			}
		}
		return nil
	}
	for k, v := range plain {
		bl := baseLine(lm.hunks(k.file), k.line)
		bk := siteKey{k.file, bl, k.fn}
		lc := lineChange{k: k, v: v, base: []int{bl}, path: pathOf(k, []siteKey{bk})}
		lc.moved, lc.movedBase = movedStack(before, after, bk, k)
		out = append(out, lc)
	}
	for k, g := range groups {
		net := add([2]float64{}, g.base, -1)
		line, most := g.hunk.c, -1.0
		for l, v := range g.head {
			net = add(net, v, 1)
			if v[0] > most || v[0] == most && l < line {
				line, most = l, v[0]
			}
		}
		from := netted(g.hunk, g.base != [2]float64{})
		var base []int
		var bk []siteKey
		for l := g.hunk.a; l < g.hunk.a+g.hunk.b; l++ {
			base, bk = append(base, l), append(bk, siteKey{k.file, l, k.fn})
		}
		hk := siteKey{k.file, max(line, 1), k.fn}
		var heads []int
		for l := g.hunk.c; l < g.hunk.c+g.hunk.d; l++ {
			heads = append(heads, l)
		}
		out = append(out, lineChange{k: hk, v: net, from: from, base: base, path: pathOf(hk, bk), changed: true, heads: heads})
	}
	slices.SortFunc(out, func(a, b lineChange) int {
		if c := strings.Compare(a.k.file, b.k.file); c != 0 {
			return c
		}
		if a.k.line != b.k.line {
			return a.k.line - b.k.line
		}
		return strings.Compare(a.k.fn, b.k.fn)
	})
	return out
}

func add(a, b [2]float64, sign float64) [2]float64 {
	return [2]float64{a[0] + sign*b[0], a[1] + sign*b[1]}
}

// span writes n lines from first: "12", "12-14".
func span(first, n int) string {
	if n <= 1 {
		return strconv.Itoa(first)
	}
	return fmt.Sprintf("%d-%d", first, first+n-1)
}

// headHunk is the hunk whose head lines hold line, or -1.
func headHunk(hs []hunk, line int) int {
	return slices.IndexFunc(hs, func(h hunk) bool { return h.d > 0 && line >= h.c && line < h.c+h.d })
}

// baseHunk is the hunk whose base lines hold line, or -1.
func baseHunk(hs []hunk, line int) int {
	return slices.IndexFunc(hs, func(h hunk) bool { return h.b > 0 && line >= h.a && line < h.a+h.b })
}

// num prints a per-request figure: whole numbers as they are, others with
// two decimals.
func num(v float64) string {
	if math.Abs(v-math.Round(v)) < 0.005 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// signedNum is num with its sign.
func signedNum(v float64) string {
	if v >= 0 {
		return "+" + num(v)
	}
	return num(v)
}

// shortFunc drops a function's package path (main.(*T).get stays).
func shortFunc(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// readSites sums the samples of files by the innermost frame in the
// worktree (the repository's own code, vendored code left out), with the
// requests the files carry, the samples skip says leaving out. An
// unreadable file is left out. With prefer, a sample is read on its
// innermost own frame that prefer says, when it has one.
func readSites(files []string, worktree string, samples []string, skip func(s *profile.Sample, perReq float64) bool, prefer func(file string, line int) bool) siteCounts {
	sc := siteCounts{v: map[siteKey][2]float64{}, path: map[siteKey][]string{}, weight: map[siteKey]int64{}, below: map[siteKey]map[string]*chainStack{},
		unowned: map[string]*chainStack{}}
	prefix := strings.TrimSuffix(worktree, "/") + "/"
	for _, f := range files {
		p, err := readProfile(f)
		if err != nil {
			continue
		}
		n := profkey.Requests(p)
		var idx []int
		for _, s := range samples {
			i := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == s })
			if i < 0 {
				break
			}
			idx = append(idx, i)
		}
		if n <= 0 || len(idx) != len(samples) {
			continue
		}
		sc.requests += n
		routes := profkey.RouteRequests(p)
		for _, s := range p.Sample {
			sc.total += float64(s.Value[idx[0]])
			if skip != nil && skip(s, perItsRequest(s, s.Value[idx[0]], n, routes)) {
				continue
			}
			var two [2]float64
			for j, i := range idx[:min(2, len(idx))] {
				two[j] = float64(s.Value[i])
			}
			k, ok := ownFrame(s, prefix, prefer)
			if !ok {
				sc.addUnowned(s, two)
				continue
			}
			v := sc.v[k]
			for j, i := range idx {
				v[j] += float64(s.Value[i])
			}
			sc.v[k] = v
			if w := s.Value[idx[0]]; w > sc.weight[k] || sc.path[k] == nil {
				sc.weight[k], sc.path[k] = w, stackPath(s, prefix)
			}
			sc.addBelow(k, s, prefix, two)
		}
	}
	return sc
}

// stackPath is a sample's stack from its outermost frame in the
// repository's own code down to its leaf, outermost first: "main.user
// (server/main.go:17)", then each frame below it, the standard
// library's by file name.
func stackPath(s *profile.Sample, prefix string) []string {
	var frames []string
	outer := -1
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function == nil {
				continue
			}
			file := filepath.Base(l.Function.Filename)
			if rel, ok := strings.CutPrefix(l.Function.Filename, prefix); ok && !strings.HasPrefix(rel, "vendor/") {
				file, outer = rel, len(frames)
			}
			frames = append(frames, fmt.Sprintf("%s (%s:%d)", l.Function.Name, file, l.Line))
		}
	}
	if outer < 0 {
		return nil
	}
	path := frames[:outer+1]
	slices.Reverse(path)
	return path
}

// ownFrame is the sample's innermost line in the repository's own code;
// with prefer, its innermost own line prefer says, when it has one.
func ownFrame(s *profile.Sample, prefix string, prefer func(file string, line int) bool) (siteKey, bool) {
	var first siteKey
	found := false
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function == nil {
				continue
			}
			if rel, ok := strings.CutPrefix(l.Function.Filename, prefix); ok && !strings.HasPrefix(rel, "vendor/") {
				k := siteKey{rel, int(l.Line), l.Function.Name}
				if prefer == nil || prefer(rel, k.line) {
					return k, true
				}
				if !found {
					first, found = k, true
				}
			}
		}
	}
	return first, found
}

// readProfile reads a profile probe ab's rounds wrote, within the limit
// any profile input has.
func readProfile(path string) (*profile.Profile, error) {
	b, err := limits.ReadFile(path, limits.Profile, "-max-profile-size")
	if err != nil {
		return nil, err
	}
	return profile.ParseData(b)
}

// hunk is a change of `git diff -U0`: lines a.. (b of them) of the base
// became lines c.. (d of them) of the head.
type hunk struct{ a, b, c, d int }

// lineMaps maps the base's lines of a file to the head's, from git diff.
type lineMaps struct {
	ctx              context.Context
	root, base, head string
	m                map[string][]hunk
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// hunks are the file's changes from the base to the head (none when
// git cannot say: the lines are then taken as they are).
func (lm *lineMaps) hunks(file string) []hunk {
	hs, ok := lm.m[file]
	if !ok {
		out, err := git(lm.ctx, lm.root, "diff", "-U0", "--no-color", "--no-ext-diff", lm.base, lm.head, "--", file)
		if err == nil {
			hs = parseHunks(out)
		}
		lm.m[file] = hs
	}
	return hs
}

func parseHunks(diff string) []hunk {
	var hs []hunk
	for _, l := range strings.Split(diff, "\n") {
		m := hunkHeader.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		at := func(i int, def int) int {
			if m[i] == "" {
				return def
			}
			v, _ := strconv.Atoi(m[i])
			return v
		}
		hs = append(hs, hunk{at(1, 0), at(2, 1), at(3, 0), at(4, 1)})
	}
	return hs
}

// baseLine is the base's line that a head line the head left alone was.
func baseLine(hunks []hunk, line int) int {
	back := make([]hunk, len(hunks))
	for i, h := range hunks {
		back[i] = hunk{h.c, h.d, h.a, h.b}
	}
	l, _ := mapLine(back, line)
	return l
}

// mapLine moves a base line past the hunks before it.
func mapLine(hunks []hunk, line int) (int, bool) {
	off := 0
	for _, h := range hunks {
		if h.b == 0 { // lines added after line a
			if line <= h.a {
				break
			}
			off += h.d
			continue
		}
		if line < h.a {
			break
		}
		if line < h.a+h.b {
			return 0, false
		}
		off += h.d - h.b
	}
	return line + off, true
}

// codeQualityIssue is one issue of a GitLab Code Quality report (the
// subset of the Code Climate format GitLab reads).
type codeQualityIssue struct {
	Description string `json:"description"`
	CheckName   string `json:"check_name"`
	Fingerprint string `json:"fingerprint"`
	Severity    string `json:"severity"` // major for an error, minor for a warning
	Location    struct {
		Path  string `json:"path"`
		Lines struct {
			Begin int `json:"begin"`
		} `json:"lines"`
	} `json:"location"`
}

// codeQuality is the annotations as a GitLab Code Quality report.
func codeQuality(as []schema.Annotation) ([]byte, error) {
	issues := make([]codeQualityIssue, 0, len(as))
	for _, a := range as {
		var q codeQualityIssue
		q.Description = a.Title + ": " + a.Message
		q.CheckName = "perfspy-" + strings.NewReplacer("/", "-per-").Replace(a.Metric)
		q.Fingerprint = fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join([]string{a.Item, a.Subject, a.Metric, a.File, a.Func, strconv.Itoa(a.Line)}, "\x00"))))[:32]
		q.Severity = map[string]string{"error": "major", "warning": "minor", "notice": "info"}[a.Level]
		q.Location.Path = a.File
		q.Location.Lines.Begin = a.Line
		issues = append(issues, q)
	}
	b, err := json.MarshalIndent(issues, "", "  ")
	return append(b, '\n'), err
}

// workflowCommand is a GitHub workflow command line for a.
func workflowCommand(a schema.Annotation) string {
	prop := func(s string) string {
		s = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
		if safetext.Clean(s) {
			return s
		}
		// A rune a terminal must not see (U+202E reorders the line) is
		// percent-encoded, byte by byte: the safe writer would otherwise
		// spell it \u202e, a name that is no file.
		var b strings.Builder
		for _, r := range s {
			if safetext.Clean(string(r)) {
				b.WriteRune(r)
				continue
			}
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		return b.String()
	}
	data := strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(a.Message)
	return fmt.Sprintf("::%s file=%s,line=%d,title=%s::%s", a.Level, prop(a.File), a.Line, prop(a.Title), data)
}
