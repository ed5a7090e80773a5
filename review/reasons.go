package review

// The compiler's reasons at one line, in the words a reviewer reads: what
// escapes now, which function lost (or won) its inlining, whether the
// line calls something new or passes it something else. Only what can
// explain the allocation that moved is kept: a constant or a zero value
// converted to an interface never allocates (static data, the runtime's
// zero value), and the inlining of functions off the allocation's stack
// is churn, counted, not listed.

import (
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
)

// reasonAt is the line whose reasons are read: its file and line in the
// head, the base lines it came from, whether the head changed it, whether
// a changed line made it allocate, whether its allocations fell, the
// function it is in and the allocation's stack ("pkg.F (file.go:12)",
// outermost first).
type reasonAt struct {
	file            string
	line            int
	baseLines       []int
	changed, caused bool
	fell            bool
	fn              string
	stack           []string
	// hunk are the head's lines of the changed line's hunk, whose
	// source is compared with the base lines' (the line alone when
	// none is given).
	hunk []int
}

// headSource is the source of the changed line's hunk in the head.
func (at reasonAt) headSource(head *diagnostics) []string {
	if len(at.hunk) > 0 {
		return head.sourceLines(at.file, at.hunk)
	}
	if l := head.source(at.file, at.line); l != "" {
		return []string{l}
	}
	return nil
}

// compilerReasons compares the head's diagnostics at a line with the
// base's at the lines it came from. A diagnostic that differs only in its
// numbers (make([]byte, 64) became make([]byte, 128)) holds at both
// revisions and is said so; "X does not escape" explains no allocation
// (what escapes now is said as such).
func compilerReasons(head, base *diagnostics, at reasonAt) []string {
	h := explaining(head.at[at.file][at.line], head.values)
	var b []diag
	for _, l := range at.baseLines {
		b = append(b, explaining(base.at[at.file][l], base.values)...)
	}
	has := func(ds []diag, msg string) bool {
		return slices.ContainsFunc(ds, func(d diag) bool { return numbers.ReplaceAllString(d.msg, "N") == numbers.ReplaceAllString(msg, "N") })
	}
	var out, both []string
	var inl []inlining
	var calls []string // calls the line makes that its base lines did not
	if at.changed {
		calls = newCalls(at.headSource(head), base.sourceLines(at.file, at.baseLines), at.stack)
	}
	for _, d := range h {
		if has(b, d.msg) {
			if strings.HasSuffix(d.msg, "escapes to heap") || strings.HasPrefix(d.msg, "moved to heap") {
				both = append(both, d.msg)
			}
			continue
		}
		if fn, ok := strings.CutPrefix(d.msg, "inlining call to "); ok {
			if slices.ContainsFunc(calls, func(c string) bool { return lastName(c) == lastName(fn) }) {
				continue // a new call, inlined: said as a new call
			}
			inl = append(inl, inlining{fn, fn + " is now inlined"})
			continue
		}
		out = append(out, escapeReason(d, len(at.baseLines) > 0, head.source(at.file, at.line)))
	}
	for _, d := range b {
		if has(h, d.msg) {
			continue
		}
		if fn, ok := strings.CutPrefix(d.msg, "inlining call to "); ok {
			r := fn + " is no longer inlined"
			if why, ok := head.noInline[fn]; ok {
				r += " (" + why + ")"
			}
			inl = append(inl, inlining{fn, r})
			continue
		}
		out = append(out, "no longer "+d.msg)
	}
	out = append(lostInlining(head, base, at), out...)
	on, off := onStack(inl, at.stack)
	out = append(out, on...)
	if len(out) == 0 {
		// Inlining off the allocation's stack explains nothing when the
		// source does: a new call, another argument.
		out = append(out, unchanged(head, base, at, both, calls))
	}
	return append(out, off...)
}

// escapeReason words a diagnostic the base did not have, at a line of
// source src. A flow's step that only spills the value says nothing.
func escapeReason(d diag, hadBase bool, src string) string {
	msg := d.msg
	if msg == "func literal escapes to heap" && strings.HasPrefix(src, "defer ") {
		// An open-coded defer's closure stays on the stack; one in a loop
		// is a record per iteration, kept until the function returns.
		return "a defer in a loop: its closure escapes to heap, one per iteration, kept until the function returns"
	}
	if m := capturing.FindStringSubmatch(msg); m != nil {
		msg = "a closure captures " + m[1] + " by reference"
	}
	r := "now " + msg
	if !hadBase {
		r = msg
	}
	if d.from != "" && !strings.Contains(d.from, "(spill)") {
		r += " (from " + d.from + ")"
	}
	return r
}

// unchanged is the reason when no diagnostic changed at the line: what
// the source says moved (a new call, another argument), or that the code
// asks for it. both are the escapes the line has at both revisions.
func unchanged(head, base *diagnostics, at reasonAt, both, calls []string) string {
	if at.caused {
		return "no change in escape analysis or inlining at this line: it allocates because of what the changed line gives it (a value, a slice's capacity, a map made anew)"
	}
	if !at.changed {
		return "no diagnostic of the compiler's explains it at this line, which the change left alone: the allocations moved in what it calls (the function table names them)"
	}
	hl, bl := strings.Join(at.headSource(head), " "), base.sourceLines(at.file, at.baseLines)
	if len(calls) > 0 {
		if at.fell {
			return "a call taken out of this line (" + strings.Join(calls, ", ") + "): what it allocated is gone"
		}
		return "a new call on this line (" + strings.Join(calls, ", ") + "): what it allocates is new (the function table names it); no change in escape analysis or inlining here"
	}
	was := ""
	if hl != "" && len(bl) == 1 && bl[0] != hl {
		was = fmt.Sprintf(": `%s` was `%s`", clip(hl), clip(bl[0]))
	}
	switch {
	case len(both) > 0 && at.fell:
		return "it escapes at both revisions (" + strings.Join(both, "; ") + "): the code asks for less (a size, a count)" + was
	case len(both) > 0:
		return "it escapes at both revisions (" + strings.Join(both, "; ") + "): the code asks for another allocation (a size, a count)" + was
	case was != "":
		return "no change in escape analysis or inlining at this line: what it passes changed (an argument, a buffer no longer passed)" + was
	case at.fell:
		return "no change in escape analysis or inlining at this line: the code no longer asks for the allocation (a make, new, conversion or call taken out)"
	}
	return "no change in escape analysis or inlining at this line: the code asks for the allocation (a new make, new, conversion or call)"
}

// clip shortens a line of source for a reason.
func clip(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:77]) + "..."
	}
	return s
}

// inlining is a change in a call's inlining at the line: the function
// (as the compiler names it) and the reason's words.
type inlining struct{ fn, why string }

// onStack parts the inlining changes: those of functions on the
// allocation's stack, named (with no stack known, the first two), and
// the others, counted: a change of helpers inlined that touches no frame
// of the allocation's is layout, not its reason.
func onStack(inl []inlining, stack []string) (on, off []string) {
	var rest []string
	for _, c := range inl {
		if len(stack) == 0 && len(on) < 2 || slices.ContainsFunc(stack, func(f string) bool { return sameFunc(f, c.fn) }) {
			on = append(on, c.why)
		} else {
			rest = append(rest, c.why)
		}
	}
	if len(rest) > 0 {
		off = []string{fmt.Sprintf("%d other functions' inlining changed at this line, none on the allocation's stack", len(rest))}
	}
	return on, off
}

// sameFunc says whether a stack's frame ("example.com/m/pkg.(*T).F
// (file.go:3)") is the function the compiler names ("(*T).F" in its own
// package, "pkg.(*T).F" from another).
func sameFunc(frame, name string) bool {
	fn, _ := splitFrame(frame)
	short := shortFunc(fn)
	return short == name || strings.HasSuffix(short, "."+name)
}

// lostInlining is the reason when the function the line is in lost its
// inlining (or won it): inlined, what it allocates can stay on its
// callers' stack; called, it escapes through its result.
func lostInlining(head, base *diagnostics, at reasonAt) []string {
	if at.fn == "" {
		return nil
	}
	short := shortFunc(at.fn)
	names := []string{short}
	if _, local, ok := strings.Cut(short, "."); ok {
		names = append(names, local)
	}
	// Only an allocation an inlined copy kept on its caller's stack: the
	// base said of what escapes here now that it does not escape.
	stayed := slices.ContainsFunc(head.at[at.file][at.line], func(d diag) bool { return base.stays[escapeSubject(d.msg)] })
	if !stayed && !at.fell {
		return nil
	}
	for _, n := range names {
		switch {
		case !at.fell && base.inlined[n] && !head.inlined[n]:
			r := n + " is no longer inlined"
			if why, ok := head.noInline[n]; ok {
				r += " (" + why + ")"
			}
			return []string{r + ": what it allocates escapes to its callers now; inlined, it stayed on their stack"}
		case at.fell && head.inlined[n] && !base.inlined[n]:
			return []string{n + " is inlined now: what it allocates stays on its callers' stack"}
		}
	}
	return nil
}

// newCalls are the calls on the head's line that its base lines did not
// make as often: the callee the allocation's stack goes through when it
// is one of them, all of them otherwise.
func newCalls(head, base []string, stack []string) []string {
	if len(head) == 0 {
		return nil
	}
	// Counted by the called name alone: x.F(...).F(...) calls F twice,
	// the second time with no receiver's name before it.
	had := map[string]int{}
	for _, l := range base {
		for _, c := range callsIn(l) {
			had[lastName(c)]++
		}
	}
	var out []string
	for _, c := range callsIn(strings.Join(head, "\n")) {
		if had[lastName(c)] > 0 {
			had[lastName(c)]--
			continue
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	for _, c := range out {
		if slices.ContainsFunc(stack, func(f string) bool {
			return sameFunc(f, c) || sameFunc(f, lastName(c)) || slices.ContainsFunc(builtinFrames[c], func(rt string) bool { return sameFunc(f, rt) })
		}) {
			return []string{c}
		}
	}
	return out
}

// builtinFrames are the runtime's functions a builtin's allocation is
// made in, as the stack shows them.
var builtinFrames = map[string][]string{
	"append": {"runtime.growslice"},
	"make":   {"runtime.makeslice", "runtime.makemap", "runtime.makemap_small", "runtime.makechan"},
	"new":    {"runtime.newobject"},
	"string": {"runtime.slicebytetostring", "runtime.intstring"},
}

// lastName is a selector's last name: "log.WithField" → "WithField".
func lastName(c string) string {
	if i := strings.LastIndex(c, "."); i >= 0 {
		return c[i+1:]
	}
	return c
}

// callPattern finds a call's name: an identifier or selector before "(".
var callPattern = regexp.MustCompile(`([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\s*\(`)

// notCalls are the keywords a "(" follows.
var notCalls = map[string]bool{"if": true, "for": true, "switch": true, "return": true, "range": true, "case": true, "select": true, "go": true, "defer": true, "interface": true, "struct": true, "map": true, "chan": true}

// callsIn are the names called in lines of source, in order, a name
// once per call; "func" for a function literal. Comments are left out.
func callsIn(src string) []string {
	var out []string
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		for _, m := range callPattern.FindAllStringSubmatch(line, -1) {
			if !notCalls[m[1]] {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// explaining keeps the diagnostics that can explain an allocation: not
// one about a constant or a zero value, not "does not escape", not
// b.Loop's "will be kept alive". values are the package's struct and
// array types.
func explaining(ds []diag, values map[string]bool) []diag {
	var out []diag
	for _, d := range ds {
		if !noAllocation(d.msg, values) && !strings.HasSuffix(d.msg, "does not escape") && !strings.HasSuffix(d.msg, "will be kept alive") {
			out = append(out, d)
		}
	}
	return out
}

// noAllocation says whether an escape is of a value that never
// allocates: a constant (a literal, or literals joined: static data) or a
// zero value (T{}: the runtime's zero value stands for it). "&T{}" can
// allocate, and a string joined from a literal and a variable does.
func noAllocation(msg string, values map[string]bool) bool {
	subject, _, ok := strings.Cut(msg, " escapes to heap")
	if !ok || subject == "" {
		return false
	}
	e, err := goparser.ParseExpr(subject)
	if err != nil {
		return false
	}
	return constant(e, values)
}

// constant says whether an expression is static data or a zero value;
// values are the package's struct and array types.
func constant(e ast.Expr, values map[string]bool) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.ParenExpr:
		return constant(e.X, values)
	case *ast.BinaryExpr:
		return constant(e.X, values) && constant(e.Y, values)
	case *ast.UnaryExpr:
		return e.Op != token.AND && constant(e.X, values)
	case *ast.CompositeLit:
		return len(e.Elts) == 0 && zeroSized(e.Type, values)
	}
	return false
}

// zeroSized says whether an empty composite literal of a type is a zero
// value the runtime stands for (a struct, an array) rather than a map,
// which an empty literal still makes. A named type's kind is not in the
// diagnostic: one of this package's is read from its declaration
// (typeKinds), one of another package's is a zero value only when
// unexported (it can only be there inlined: context's backgroundCtx{}).
func zeroSized(t ast.Expr, values map[string]bool) bool {
	switch t := t.(type) {
	case *ast.StructType, *ast.ArrayType:
		return true
	case *ast.Ident:
		return values[t.Name]
	case *ast.SelectorExpr:
		return !ast.IsExported(t.Sel.Name)
	}
	return false
}

// unexplained says whether a reason is the one given when no diagnostic
// of the compiler's changed.
func unexplained(why string) bool {
	return strings.HasPrefix(why, "no diagnostic of the compiler's") || strings.HasPrefix(why, "no change in escape analysis")
}

// capturing is -m=2's note of a variable a closure captures by reference.
var capturing = regexp.MustCompile(`capturing by ref: (\S+)`)

// numbers are a diagnostic's numbers, which a size change moves.
var numbers = regexp.MustCompile(`\d+`)

// escapeSubject is what a diagnostic says escapes or stays: "&key{...}"
// of "&key{...} escapes to heap", "p" of "moved to heap: p"; "" for
// another kind.
func escapeSubject(msg string) string {
	for _, suf := range []string{" escapes to heap", " does not escape"} {
		if s, ok := strings.CutSuffix(msg, suf); ok {
			return s
		}
	}
	if s, ok := strings.CutPrefix(msg, "moved to heap: "); ok {
		return s
	}
	return ""
}
