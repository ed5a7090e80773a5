package review

import (
	"bytes"
	"errors"
	"go/ast"
	goparser "go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/schema"
)

// whatChanged says what changed at a dependency's function between the
// two versions of its module that a go.mod change moved: the function is
// new, its body changed, or neither (the path to it moved: a caller
// changed). It reads both versions' source from the module cache, where
// the two builds put them; "" when either cannot be read.
//
// frame is the function's name, with its position in the head's version
// after it when known ("pkg.F (file.go:12)"): a closure in a package-level
// variable (pkg.init.func7) is found by that line, as the variable it
// initializes, and compared with the same variable in the base's version,
// not with a func init.
func whatChanged(modCache string, c schema.GoModChange, frame string) string {
	if modCache == "" || c.Kind != "require" || c.Before == "" || c.After == "" {
		return ""
	}
	fn, pos, _ := strings.Cut(frame, " (")
	pkg := funcPackage(fn)
	if pkg != c.Path && !strings.HasPrefix(pkg, c.Path+"/") {
		return ""
	}
	recv, name := funcDeclName(strings.TrimPrefix(fn, pkg+"."))
	if name == "" {
		return ""
	}
	varClosure := packageVarClosure.MatchString(strings.TrimPrefix(fn, pkg+"."))
	file, line := framePos(pos)
	if varClosure && line == 0 {
		return "" // no line to find its variable by
	}
	var src [2]string
	var found [2]bool
	var varName string
	// The head's version first: a variable's closure is found there.
	for _, i := range []int{1, 0} {
		v := []string{c.Before, c.After}[i]
		// The path and versions are the head's go.mod's: nothing outside
		// the module cache is read ("../" in either).
		dir, err := limits.Inside(modCache, filepath.Join(escapeModPath(c.Path)+"@"+v, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, c.Path), "/"))))
		if errors.Is(err, fs.ErrNotExist) {
			continue // not there: no declaration
		}
		if err != nil {
			return ""
		}
		var s string
		var ok bool
		switch {
		case !varClosure:
			s, ok, err = funcSource(dir, recv, name)
		case i == 1:
			varName, s, ok, err = varAt(dir, file, line)
			if err == nil && !ok {
				return "" // no variable there: nothing said
			}
		default:
			s, ok, err = varSource(dir, varName)
		}
		if err != nil {
			return ""
		}
		src[i], found[i] = s, ok
	}
	short := shortFunc(fn)
	if varClosure {
		short += " (the closure in var " + varName + ")"
	}
	switch {
	case !found[1]:
		return ""
	case !found[0]:
		return short + " is new in " + c.After
	case src[0] != src[1]:
		return short + "'s body changed between " + c.Before + " and " + c.After
	}
	return short + " is the same in both versions: the path to it moved"
}

// packageVarClosure matches a closure in a package-level variable's
// initializer, as the compiler names it (init.func7; glob..func7 before
// Go 1.22): no declaration carries its name.
var packageVarClosure = regexp.MustCompile(`^(init|glob\.)\.func\d+`)

// framePos is a frame's file and line in the head's version, from its
// position ("file.go:12)" or "file.go:12; file.go:9 in the base)").
func framePos(pos string) (string, int) {
	pos, _, _ = strings.Cut(strings.TrimSuffix(pos, ")"), ";")
	file, l, ok := strings.Cut(pos, ":")
	n, err := strconv.Atoi(l)
	if !ok || err != nil {
		return "", 0
	}
	return filepath.Base(file), n
}

// varAt is the package-level variable whose declaration spans line of
// file in the package in dir: its name and declaration, printed without
// comments.
func varAt(dir, file string, line int) (string, string, bool, error) {
	fset := token.NewFileSet()
	f, err := parseGo(fset, filepath.Join(dir, file))
	if err != nil || f == nil {
		return "", "", false, err
	}
	for _, spec := range varSpecs(f) {
		if fset.Position(spec.Pos()).Line <= line && line <= fset.Position(spec.End()).Line && len(spec.Names) > 0 {
			s, err := printSpec(fset, spec)
			return spec.Names[0].Name, s, err == nil, err
		}
	}
	return "", "", false, nil
}

// varSource is the declaration of the package-level variable name in the
// package in dir, and whether it is there.
func varSource(dir, name string) (string, bool, error) {
	fset, files, err := packageFiles(dir)
	if err != nil {
		return "", false, err
	}
	for _, f := range files {
		for _, spec := range varSpecs(f) {
			if slices.ContainsFunc(spec.Names, func(id *ast.Ident) bool { return id.Name == name }) {
				s, err := printSpec(fset, spec)
				return s, err == nil, err
			}
		}
	}
	return "", false, nil
}

// packageFiles parses the package's regular Go files in dir, tests
// aside (none when the folder does not exist; a file that does not parse
// is left out).
func packageFiles(dir string) (*token.FileSet, []*ast.File, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return fset, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var out []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		if f, _ := parseGo(fset, filepath.Join(dir, e.Name())); f != nil {
			out = append(out, f)
		}
	}
	return fset, out, nil
}

// parseGo parses a regular Go file of a module's (nil when it is not
// one: a link to elsewhere, a FIFO).
func parseGo(fset *token.FileSet, path string) (*ast.File, error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	f, err := goparser.ParseFile(fset, path, nil, goparser.SkipObjectResolution)
	if err != nil {
		return nil, nil
	}
	return f, nil
}

// varSpecs are a file's package-level variable declarations.
func varSpecs(f *ast.File) []*ast.ValueSpec {
	var out []*ast.ValueSpec
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, s := range g.Specs {
				if v, ok := s.(*ast.ValueSpec); ok {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// printSpec prints a variable's declaration without its comments.
func printSpec(fset *token.FileSet, spec *ast.ValueSpec) (string, error) {
	spec.Doc, spec.Comment = nil, nil
	var b bytes.Buffer
	err := printer.Fprint(&b, fset, spec)
	return b.String(), err
}

// closureSuffix is a closure's or an instantiation's part of a function's
// name: the declaration is its enclosing function's.
var closureSuffix = regexp.MustCompile(`(\.func\d+(\.\d+)*|\.gowrap\d+|\[\.\.\.\]|-fm)+$`)

// funcDeclName splits a function's name in its package, (*T).M, T.M or
// F, into its receiver's type name and its own.
func funcDeclName(s string) (recv, name string) {
	s = closureSuffix.ReplaceAllString(s, "")
	if strings.HasPrefix(s, "(") {
		end := strings.Index(s, ").")
		if end < 0 {
			return "", ""
		}
		return strings.TrimPrefix(s[1:end], "*"), s[end+2:]
	}
	if t, m, ok := strings.Cut(s, "."); ok {
		return t, m
	}
	return "", s
}

// funcSource is the declaration of recv.name (or the function name) in
// the package in dir, printed without its comments, and whether it is
// there. A folder that does not exist has no declaration.
func funcSource(dir, recv, name string) (string, bool, error) {
	fset, files, err := packageFiles(dir)
	if err != nil {
		return "", false, err
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Name.Name != name || receiverName(fd) != recv {
				continue
			}
			fd.Doc = nil
			var b bytes.Buffer
			if err := printer.Fprint(&b, fset, fd); err != nil {
				return "", false, err
			}
			return b.String(), true, nil
		}
	}
	return "", false, nil
}

// receiverName is a method's receiver's type name ("" for a function).
func receiverName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	if id := rootIdent(fd.Recv.List[0].Type); id != nil {
		return id.Name
	}
	return ""
}

// escapeModPath is a module path as the module cache spells its folder:
// each upper-case letter as '!' and its lower case.
func escapeModPath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
