package review

// Dependency and toolchain bumps: what go.mod changed between the
// revisions, and the figures each change moved, annotated on the go.mod
// line that moved them rather than on the unchanged line of the
// repository's code that calls into the module.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/internal/shellwords"
	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/schema"
)

// goMod is what a go.mod says that a review reads: the go and toolchain
// lines, each required module's version and each replacement, with the
// line each is on.
type goMod struct {
	lines    map[string]int    // "go", "toolchain", "require PATH", "replace PATH"
	values   map[string]string // the same keys: the version, or the replacement
	requires []string          // "require PATH" keys, in file order
}

// parseGoMod reads go.mod's directives line by line: single lines and
// blocks, comments dropped. What it does not know (module, exclude,
// retract, godebug, tool) it leaves out.
func parseGoMod(text string) goMod {
	m := goMod{lines: map[string]int{}, values: map[string]string{}}
	block := ""
	for i, raw := range strings.Split(text, "\n") {
		line, _, _ := strings.Cut(raw, "//")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		verb, args := block, f
		switch {
		case block != "" && f[0] == ")":
			block = ""
			continue
		case block == "" && len(f) == 2 && f[1] == "(":
			block = f[0]
			continue
		case block == "":
			verb, args = f[0], f[1:]
		}
		n := i + 1
		switch {
		case (verb == "go" || verb == "toolchain") && len(args) == 1:
			m.lines[verb], m.values[verb] = n, args[0]
		case verb == "require" && len(args) >= 2:
			k := "require " + args[0]
			m.lines[k], m.values[k] = n, args[1]
			m.requires = append(m.requires, k)
		case verb == "godebug":
			// godebug key=value, one or more a line: each key is a
			// setting of the standard library's behaviour.
			for _, kv := range args {
				if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
					m.lines["godebug "+k], m.values["godebug "+k] = n, v
				}
			}
		case verb == "replace":
			// Keyed by the module: a bump that moves both its require and
			// its replace (the old version's folder for the new one's) is
			// one change of each.
			if at := slices.Index(args, "=>"); at >= 1 {
				k := "replace " + args[0]
				m.lines[k], m.values[k] = n, strings.Join(append(append([]string(nil), args[1:at]...), args[at:]...), " ")
			}
		}
	}
	return m
}

// moduleChanges lists what changed in each go.mod between base and head,
// and the go.sum files that changed while their go.mod did not; and
// whether the head changed any Go file.
func moduleChanges(ctx context.Context, root, base, head string) ([]schema.GoModChange, int, bool, error) {
	names, err := git(ctx, root, "diff", "--name-only", base, head)
	if err != nil {
		return nil, 0, false, err
	}
	var files []string
	codeChanged := false
	for _, f := range strings.Fields(names) {
		switch {
		case path.Base(f) == "go.mod" || path.Base(f) == "go.sum":
			files = append(files, f)
		case strings.HasSuffix(f, ".go"):
			codeChanged = true
		}
	}
	var out []schema.GoModChange
	for _, f := range files {
		if path.Base(f) == "go.sum" {
			if !slices.Contains(files, path.Join(path.Dir(f), "go.mod")) {
				out = append(out, schema.GoModChange{File: f, Line: 1, Kind: "go.sum", Path: "go.sum", Before: "", After: "changed"})
			}
			continue
		}
		b, _ := git(ctx, root, "show", base+":"+f)
		h, _ := git(ctx, root, "show", head+":"+f)
		out = append(out, goModChanges(f, parseGoMod(b), parseGoMod(h))...)
	}
	out, omitted := boundChanges(out)
	return out, omitted, codeChanged, nil
}

// maxModuleChanges bounds the go.mod changes a review lists, judges
// functions by and prints: a go.mod of thousands of changed lines (17.6 MB
// gave 400,000 log lines and a review.json of 71.5 MB) is listed in part.
const maxModuleChanges = 200

// boundChanges keeps at most maxModuleChanges changes, the go, toolchain
// and godebug lines first (what every standard-library function comes
// with), and says how many it left out.
func boundChanges(cs []schema.GoModChange) ([]schema.GoModChange, int) {
	if len(cs) <= maxModuleChanges {
		return cs, 0
	}
	first := func(c schema.GoModChange) int {
		switch c.Kind {
		case "go", "toolchain", "godebug":
			return 0
		}
		return 1
	}
	slices.SortStableFunc(cs, func(a, b schema.GoModChange) int { return first(a) - first(b) })
	return cs[:maxModuleChanges:maxModuleChanges], len(cs) - maxModuleChanges
}

// goModChanges compares one go.mod's two revisions: each key whose value
// differs, with its line in the head (0 when the head removed it).
func goModChanges(file string, b, h goMod) []schema.GoModChange {
	keys := map[string]bool{}
	for k := range b.values {
		keys[k] = true
	}
	for k := range h.values {
		keys[k] = true
	}
	var out []schema.GoModChange
	for _, k := range sortedKeys(keys) {
		if b.values[k] == h.values[k] {
			continue
		}
		kind, p, _ := strings.Cut(k, " ")
		if p == "" {
			p = kind
		}
		out = append(out, schema.GoModChange{File: file, Line: h.lines[k], Kind: kind, Path: p, Before: b.values[k], After: h.values[k]})
	}
	return out
}

// funcPackage is the package path of a profile's function name:
// "example.com/m/pkg.(*T).M" is example.com/m/pkg.
func funcPackage(fn string) string {
	slash := strings.LastIndex(fn, "/")
	if dot := strings.Index(fn[slash+1:], "."); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}

// moduleOf is the change a function's code comes with: the changed
// required (or replaced) module whose path is the longest prefix of the
// function's package, or, for the standard library's, a changed go or
// toolchain line or godebug setting (the toolchain's first).
func moduleOf(fn string, changes []schema.GoModChange) (schema.GoModChange, bool) {
	pkg := funcPackage(fn)
	best, found := schema.GoModChange{}, false
	for _, c := range changes {
		if c.Line <= 0 {
			continue // removed from the head: no line to put it on
		}
		switch c.Kind {
		case "require", "replace":
			mod, _, _ := strings.Cut(c.Path, "@")
			bestMod, _, _ := strings.Cut(best.Path, "@")
			// The longest module path; at the same path, the require
			// line (its version is the one a reader knows).
			if (pkg == mod || strings.HasPrefix(pkg, mod+"/")) && (!found || len(mod) > len(bestMod) || len(mod) == len(bestMod) && c.Kind == "require") {
				best, found = c, true
			}
		case "go", "toolchain", "godebug":
			// The toolchain's line first, then go's, then a godebug
			// setting's (one the standard library reads).
			rank := map[string]int{"toolchain": 3, "go": 2, "godebug": 1}
			if profkey.StdPackage(pkg) && (!found || rank[c.Kind] > rank[best.Kind]) {
				best, found = c, true
			}
		}
	}
	return best, found
}

// moduleCause finds, for a line of the repository that the head did not
// change, the go.mod change below it: the innermost frame of its stack,
// below the line itself, whose code a changed module (or a changed
// toolchain) brings. It returns the change and that frame ("fn
// (file:line)"). When the head changed no Go file at all (only go.mod
// and go.sum) and one change of go.mod is all there is to blame (one
// module, or the toolchain), a line whose own allocation moved (no frame
// below it: the call into the module was compiled otherwise) is that
// change's, at the line itself.
func moduleCause(lc lineChange, changes []schema.GoModChange, codeChanged bool) (schema.GoModChange, string, bool) {
	if lc.changed || len(changes) == 0 {
		return schema.GoModChange{}, "", false
	}
	own := fmt.Sprintf("%s (%s:%d)", lc.k.fn, lc.k.file, lc.k.line)
	// The stack whose count changed, when it is known: the heaviest
	// stack through the line can be one that did not move.
	path := lc.path
	if lc.moved != nil {
		path = lc.moved
	}
	if c, ok := soleChange(changes); ok && !codeChanged && (len(path) == 0 || path[len(path)-1] == own) {
		return c, own, true
	}
	i := slices.Index(path, own)
	if i < 0 {
		return schema.GoModChange{}, "", false
	}
	return causeBelow(path, i, changes, lc.movedBase)
}

// causeBelow is the change of go.mod whose code runs below frame i of a
// stack (outermost first; -1: the whole stack), and its frame: the
// innermost frame of a changed module, else of the standard library
// when the toolchain changed.
func causeBelow(path []string, i int, changes []schema.GoModChange, movedBase []string) (schema.GoModChange, string, bool) {
	var std *schema.GoModChange
	var stdFrame string
	for j := len(path) - 1; j > i; j-- {
		fn, _, _ := strings.Cut(path[j], " (")
		c, ok := moduleOf(fn, changes)
		if !ok {
			continue
		}
		if c.Kind == "require" || c.Kind == "replace" {
			return c, withBaseLine(path[j], movedBase), true
		}
		// The runtime's, reflect's and internal packages' frames are the
		// allocation's mechanics: the innermost package a program
		// imports names it (encoding/json, net/http).
		stdFn, _, _ := strings.Cut(stdFrame, " (")
		if std == nil || mechanics(funcPackage(stdFn)) && !mechanics(funcPackage(fn)) {
			std, stdFrame = &c, path[j]
		}
	}
	if std != nil {
		return *std, withBaseLine(stdFrame, movedBase), true
	}
	return schema.GoModChange{}, "", false
}

// withBaseLine adds to a head frame ("pkg.F (mux.go:475)") the line of
// the same function in the base's stack of the same chain, when it
// moved: "pkg.F (mux.go:475; mux.go:470 in the base)".
func withBaseLine(frame string, base []string) string {
	fn, pos, _ := strings.Cut(frame, " (")
	pos = strings.TrimSuffix(pos, ")")
	key := profkey.FuncKey(fn, profkey.DefaultFolds)
	for _, b := range base {
		bfn, bpos, _ := strings.Cut(b, " (")
		if bpos = strings.TrimSuffix(bpos, ")"); profkey.FuncKey(bfn, profkey.DefaultFolds) == key && bpos != pos {
			return fmt.Sprintf("%s (%s; %s in the base)", fn, pos, bpos)
		}
	}
	return frame
}

// soleChange is the one change of go.mod a pull request that changed no
// Go file can be blamed for: its one required (or replaced) module, or,
// with none, its go or toolchain line.
func soleChange(changes []schema.GoModChange) (schema.GoModChange, bool) {
	mods := map[string]schema.GoModChange{} // by module: its require line first
	var tool []schema.GoModChange
	for _, c := range changes {
		switch {
		case c.Line <= 0:
		case c.Kind == "require" || c.Kind == "replace":
			if m, ok := mods[c.Path]; !ok || m.Kind != "require" {
				mods[c.Path] = c
			}
		case c.Kind == "go" || c.Kind == "toolchain" || c.Kind == "godebug":
			tool = append(tool, c)
		}
	}
	switch {
	case len(mods) == 1 && len(tool) == 0:
		for _, c := range mods {
			return c, true
		}
	case len(mods) == 0 && len(tool) > 0:
		return tool[len(tool)-1], true // the toolchain line, when it changed
	}
	return schema.GoModChange{}, false
}

// mechanics are the standard library's packages that carry out what
// another asks for: the runtime, reflect, internal packages.
func mechanics(pkg string) bool {
	return pkg == "runtime" || pkg == "reflect" || strings.HasPrefix(pkg, "internal/") || strings.Contains(pkg, "/internal/") || strings.HasPrefix(pkg, "runtime/")
}

// moduleLabel names a change as a reviewer reads it: "example.com/m
// v1.0.0 → v1.1.0", "go 1.26 → 1.27".
func moduleLabel(c schema.GoModChange) string {
	b, a := c.Before, c.After
	if b == "" {
		b = "(none)"
	}
	if a == "" {
		a = "(removed)"
	}
	p := c.Path
	switch c.Kind {
	case "replace":
		p = "replace " + p
	case "godebug":
		p = "godebug " + p
	}
	return fmt.Sprintf("%s %s → %s", p, b, a)
}

// moduleSums adds the functions' per-request (per-op) changes of one
// item's profile by the go.mod change their code comes with.
func moduleSums(fns []schema.ABFunction, changes []schema.GoModChange) map[int]float64 {
	out := map[int]float64{}
	for _, f := range fns {
		if c, ok := moduleOf(f.Key, changes); ok {
			out[slices.IndexFunc(changes, func(x schema.GoModChange) bool { return x == c })] += f.Delta
		}
	}
	return out
}

// depChange is what one go.mod change moved in one profile of an item:
// the lines of the repository it moved, netted, and the frames in its
// code where it moved them, heaviest first.
type depChange struct {
	c        schema.GoModChange
	modCache string // the module cache, where what changed is read
	v        [2]float64
	frames   map[string]float64
	path     []string // the heaviest line's stack
	most     float64
	of       float64 // the item's whole figure per request (op), in the base
}

func (d *depChange) add(lc lineChange, frame string) {
	d.v = add(d.v, lc.v, 1)
	if d.frames == nil {
		d.frames = map[string]float64{}
	}
	d.frames[frame] += lc.v[0]
	if w := math.Abs(lc.v[0]) + math.Abs(lc.v[1])/1e6; w >= d.most {
		d.most, d.path = w, lc.path
		if lc.moved != nil {
			d.path = lc.moved
		}
	}
}

// annotation puts the change on go.mod's line: the module and its two
// versions, the figure, where in its code, and the line of the
// repository that calls it (the annotation's stack holds the whole path).
func (d *depChange) annotation(kind, per, subject string, failed bool) (schema.Annotation, bool) {
	if d.c.Line <= 0 {
		return schema.Annotation{}, false
	}
	frames := slices.SortedFunc(maps.Keys(d.frames), func(a, b string) int {
		return cmp.Or(cmp.Compare(math.Abs(d.frames[b]), math.Abs(d.frames[a])), strings.Compare(a, b))
	})
	top, _, _ := strings.Cut(frames[0], " (")
	a, ok := annotation(lineChange{k: siteKey{d.c.File, d.c.Line, top}, v: d.v, path: d.path, of: d.of}, kind, per, subject, failed)
	if !ok {
		return a, false
	}
	at := frames[0]
	if len(frames) > 1 {
		at += fmt.Sprintf(" and %d more", len(frames)-1)
	}
	via := ""
	if len(d.path) > 0 {
		via = ", called from " + d.path[0]
	}
	a.Message = fmt.Sprintf("%s: %s, at %s%s", moduleLabel(d.c), a.Message, at, via)
	if w := whatChanged(d.modCache, d.c, frames[0]); w != "" {
		a.Message += "; " + w
	}
	what := d.c.Path + " " + d.c.After
	switch d.c.Kind {
	case "require":
		what = "module " + what
	case "replace":
		what = "replace " + what
	case "go.sum":
		what = "go.sum"
	}
	a.Title = fmt.Sprintf("%s (%s)", strings.Replace(a.Title, " in "+shortFunc(top), "", 1), what)
	return a, true
}

// moduleSection is review.md's list of what go.mod changed, each change
// with the allocations its code moved in each item: read by stack where
// the item's lines were annotated (depMoved: the innermost frame of a
// changed module under the allocation, direct or indirect), else by the
// functions tables' rows, grouped by the module whose code they are.
func (r *Result) moduleSection() string {
	if len(r.Modules) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("**go.mod changed** (a dependency or the toolchain): the allocations each change moved, by the functions of its code.\n\n| line | change | moved |\n|---|---|---|\n")
	for i, c := range r.Modules {
		var moved []string
		for _, it := range r.Items {
			byProfile := map[string][]schema.ABFunction{}
			for _, f := range it.Functions {
				// The window's allocations (a server's, a route's, a
				// benchmark's), not the slowest requests' own bills.
				if f.Sample == "alloc_objects" && (f.Profile == "allocs" || strings.HasSuffix(f.Profile, " allocs")) {
					byProfile[f.Profile] = append(byProfile[f.Profile], f)
				}
			}
			for _, p := range sortedKeys(byProfile) {
				v, ok := moduleSums(byProfile[p], r.Modules)[i]
				if m, read := r.depMoved[depKey(it.Name, p)]; read {
					// Read by stack: a function's own package is not
					// its allocation's module when the standard library
					// allocates for it.
					v, ok = m[c]
				}
				if ok && math.Abs(v) >= 0.005 {
					subject := strings.TrimSpace(strings.TrimSuffix(p, "allocs"))
					if subject == "" {
						subject = it.Name
					}
					per := "req"
					if it.Kind == "benchmarks" {
						per = "op"
					}
					moved = append(moved, fmt.Sprintf("%s: %s allocs/%s", safetext.Markdown(subject), signedFixed(v), per))
				}
			}
		}
		if len(moved) == 0 {
			moved = []string{"no allocation of its code moved"}
		}
		where := c.File
		if c.Line > 0 {
			where = fmt.Sprintf("%s:%d", c.File, c.Line)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", safetext.Code(where), safetext.Markdown(moduleLabel(c)), strings.Join(moved, "; "))
	}
	if r.ModulesOmitted > 0 {
		fmt.Fprintf(&b, "\n%d more lines of go.mod changed: not listed, nor judged by.\n", r.ModulesOmitted)
	}
	b.WriteString("\n")
	return b.String()
}

// bisectHints offers probe bisect for a pull request of several commits
// whose exact count regressed: the command that names the commit that
// moved it, one a figure and item (docs/bisect.md).
func (r *Result) bisectHints() string {
	commits, _ := strconv.Atoi(r.Head["commits"])
	if commits < 2 || r.cfg == nil {
		return ""
	}
	var b strings.Builder
	done := map[string]bool{}
	for _, ch := range r.changed() {
		it, c := ch.item, ch.c
		if c.Verdict != "regression" || !IsCount(c.Metric) || done[it.Name+c.Metric] {
			continue
		}
		var args []string
		switch {
		case it.Kind == "server" && strings.HasSuffix(c.Metric, "/req"):
			i := slices.IndexFunc(r.cfg.Servers, func(s Server) bool { return s.Name == it.Name })
			if i < 0 {
				continue
			}
			s := r.cfg.Servers[i]
			if s.Requests != "" {
				args = append(args, "-requests", shellwords.Quote(s.Requests))
			} else if s.Path != "" {
				args = append(args, "-path", shellwords.Quote(s.Path))
			}
			args = append(args, shellwords.Quote("./"+strings.TrimPrefix(s.Target, "./")))
		case it.Kind == "benchmarks" && strings.HasSuffix(c.Metric, "/op"):
			i := slices.IndexFunc(r.cfg.Benchmarks, func(x Benchmark) bool { return x.Package+" "+x.Bench == it.Name })
			if i < 0 {
				continue
			}
			x := r.cfg.Benchmarks[i]
			args = append(args, "-bench", shellwords.Quote(x.Bench))
			if x.BenchTime != "" {
				args = append(args, "-benchtime", shellwords.Quote(x.BenchTime))
			}
			args = append(args, shellwords.Quote("./"+strings.TrimPrefix(x.Package, "./")))
		default:
			continue
		}
		if !probe.Bisectable(c.Metric) {
			continue
		}
		done[it.Name+c.Metric] = true
		cmd := fmt.Sprintf("probe bisect -good %s -bad %s -metric %s %s", shellwords.Quote(short(r.Base["commit"])), shellwords.Quote(short(r.Head["commit"])), shellwords.Quote(c.Metric), strings.Join(args, " "))
		fmt.Fprintf(&b, "- %s %s grew in %d commits: %s names the commit that moved it (one counted run per step; docs/bisect.md).\n", safetext.Markdown(it.Name), safetext.Markdown(c.Metric), commits, safetext.Code(cmd))
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// readHistory reads what the pull request did besides its code: what
// go.mod changed (Modules), whether a Go file did, and how many commits
// it has (head.commits).
func (r *Result) readHistory(ctx context.Context, root string, logf func(string, ...any)) {
	var err error
	if r.Modules, r.ModulesOmitted, r.codeChanged, err = moduleChanges(ctx, root, r.Base["commit"], r.Head["commit"]); err != nil {
		logf("what go.mod changed: %v", err)
	}
	if r.ModulesOmitted > 0 {
		logf("go.mod: %d changes more than the %d listed (review.json modules_omitted)", r.ModulesOmitted, len(r.Modules))
	}
	for i, c := range r.Modules {
		if i == 20 {
			logf("... and %d more changes of go.mod in review.json", len(r.Modules)-i)
		}
		if i < 20 {
			logf("%s changes %s", c.File, moduleLabel(c))
		}
		if c.Kind == "require" && r.modCache == "" {
			// Where the builds put both versions' source: what changed
			// at a dependency's function is read there.
			if out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output(); err == nil {
				r.modCache = strings.TrimSpace(string(out))
			}
		}
	}
	if n, err := git(ctx, root, "rev-list", "--count", r.Base["commit"]+".."+r.Head["commit"]); err == nil {
		r.Head["commits"] = n
	}
}
