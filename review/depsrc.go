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
func whatChanged(modCache string, c schema.GoModChange, fn string) string {
	if modCache == "" || c.Kind != "require" || c.Before == "" || c.After == "" {
		return ""
	}
	pkg := funcPackage(fn)
	if pkg != c.Path && !strings.HasPrefix(pkg, c.Path+"/") {
		return ""
	}
	recv, name := funcDeclName(strings.TrimPrefix(fn, pkg+"."))
	if name == "" {
		return ""
	}
	var src [2]string
	var found [2]bool
	for i, v := range []string{c.Before, c.After} {
		// The path and versions are the head's go.mod's: nothing outside
		// the module cache is read ("../" in either).
		dir, err := limits.Inside(modCache, filepath.Join(escapeModPath(c.Path)+"@"+v, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, c.Path), "/"))))
		if errors.Is(err, fs.ErrNotExist) {
			continue // not there: no declaration
		}
		if err != nil {
			return ""
		}
		s, ok, err := funcSource(dir, recv, name)
		if err != nil {
			return ""
		}
		src[i], found[i] = s, ok
	}
	short := shortFunc(fn)
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
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := goparser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, goparser.SkipObjectResolution)
		if err != nil {
			continue
		}
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
