package review

import (
	"cmp"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"math"
	"slices"
	"strings"
)

// A line the head left alone can allocate because of a line it changed:
// a pointer to a local stored on the next line moves the local to the
// heap, a capacity dropped above an append loop makes the append grow, a
// new closure captures a variable, a map made on a changed line gets its
// first group at an insert below. The change is the changed line's: the
// figures go there, with the allocating line named beside them.

// funcIdents are the names each line of a function mentions and defines
// (assigns, declares, ranges over into, increments).
type funcIdents struct {
	from, to int // the function's lines
	uses     map[int]map[string]bool
	defs     map[int]map[string]bool
}

// fileIdents parses a head file's functions; nil when it does not parse.
func fileIdents(src string) []funcIdents {
	fset := token.NewFileSet()
	f, err := goparser.ParseFile(fset, "", src, goparser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	var out []funcIdents
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		fi := funcIdents{from: fset.Position(fd.Pos()).Line, to: fset.Position(fd.End()).Line, uses: map[int]map[string]bool{}, defs: map[int]map[string]bool{}}
		mark := func(m map[int]map[string]bool, id *ast.Ident) {
			l := fset.Position(id.Pos()).Line
			if m[l] == nil {
				m[l] = map[string]bool{}
			}
			m[l][id.Name] = true
		}
		def := func(e ast.Expr) {
			// The variable assigned: x, x[k], x.f all change x's value.
			if id := rootIdent(e); id != nil {
				mark(fi.defs, id)
			}
		}
		// Parameters and named results are defined on the signature's
		// line: a closure below that captures one moves it to the heap
		// there.
		for _, fl := range []*ast.FieldList{fd.Type.Params, fd.Type.Results} {
			if fl == nil {
				continue
			}
			for _, f := range fl.List {
				for _, id := range f.Names {
					mark(fi.defs, id)
					mark(fi.uses, id)
				}
			}
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.Ident:
				mark(fi.uses, x)
			case *ast.AssignStmt:
				for _, e := range x.Lhs {
					def(e)
				}
			case *ast.ValueSpec:
				for _, id := range x.Names {
					mark(fi.defs, id)
				}
			case *ast.RangeStmt:
				for _, e := range []ast.Expr{x.Key, x.Value} {
					if e != nil {
						def(e)
					}
				}
			case *ast.IncDecStmt:
				def(x.X)
			}
			return true
		})
		out = append(out, fi)
	}
	return out
}

// commonNames are names too common to tie two lines together.
var commonNames = map[string]bool{"_": true, "err": true, "ok": true, "nil": true, "true": true, "false": true}

// causeLine is the changed line of line's function that line's change is
// due to: the nearest changed line that shares a variable with it, which
// one of the two defines. 0 when there is none.
func causeLine(fns []funcIdents, hs []hunk, line int) int {
	i := slices.IndexFunc(fns, func(f funcIdents) bool { return line >= f.from && line <= f.to })
	if i < 0 {
		return 0
	}
	f := fns[i]
	best := 0
	for m := f.from; m <= f.to; m++ {
		if m == line || headHunk(hs, m) < 0 {
			continue
		}
		if best != 0 && abs(m-line) >= abs(best-line) {
			continue
		}
		for name := range f.uses[m] {
			if !commonNames[name] && f.uses[line][name] && (f.defs[line][name] || f.defs[m][name]) {
				best = m
				break
			}
		}
	}
	return best
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// causeLines moves each change on a line the head left alone, in a file
// it changed, to the changed line of the same function that caused it
// (causeLine), keeping the allocating line and its base lines; changes
// that land on one line are summed.
func (lm *lineMaps) causeLines(lcs []lineChange) []lineChange {
	parsed := map[string][]funcIdents{}
	for i := range lcs {
		lc := &lcs[i]
		// A line whose change is below what an annotation shows (the
		// runtime's noise) is no change to move.
		if lc.changed || !strings.HasSuffix(lc.k.file, ".go") || math.Abs(lc.v[0]) < 0.005 && math.Abs(lc.v[1]) < 0.5 {
			continue
		}
		hs := lm.hunks(lc.k.file)
		if len(hs) == 0 {
			continue
		}
		fns, ok := parsed[lc.k.file]
		if !ok {
			src, err := git(lm.ctx, lm.root, "show", lm.head+":"+lc.k.file)
			if err == nil {
				fns = fileIdents(src)
			}
			parsed[lc.k.file] = fns
		}
		if m := causeLine(fns, hs, lc.k.line); m > 0 {
			lc.alloc, lc.allocBase = lc.k.line, lc.base
			lc.k.line, lc.changed = m, true
			h := hs[headHunk(hs, m)]
			lc.base = nil
			for l := h.a; l < h.a+h.b; l++ {
				lc.base = append(lc.base, l)
			}
		}
	}
	// One change per line: a changed line's own and those it caused.
	var out []lineChange
	at := map[siteKey]int{}
	for _, lc := range lcs {
		j, ok := at[lc.k]
		if !ok {
			at[lc.k] = len(out)
			out = append(out, lc)
			continue
		}
		o := &out[j]
		if weight(lc.v) > weight(o.v) {
			o.path = lc.path
		}
		o.v = add(o.v, lc.v, 1)
		// The changed line's own change and one it caused: both named.
		o.own = o.own || o.alloc == 0 || lc.alloc == 0
		if o.alloc == 0 {
			o.alloc, o.allocBase = lc.alloc, lc.allocBase
		}
		if o.base == nil {
			o.base = lc.base
		}
		o.from = cmp.Or(o.from, lc.from)
	}
	return out
}

// weight is a change's size: its count, then its bytes.
func weight(v [2]float64) float64 { return math.Abs(v[0]) + math.Abs(v[1])/1e6 }

// rootIdent is the name an expression reads through: x of x, *x, x[k],
// x.f and T[P] (a generic receiver's type); nil for any other.
func rootIdent(e ast.Expr) *ast.Ident {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			e = x.X
		default:
			return nil
		}
	}
}
