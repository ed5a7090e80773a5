package perfspy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// docs/design.md is the map of the code; these tests fail when the map
// and the code drift apart.

// TestDesignPackages: every package of the module is in the map's table,
// and every package the table names exists (cmd/ and targets/ are named
// as groups).
func TestDesignPackages(t *testing.T) {
	doc := readDoc(t)
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/perfspy/perfspy"
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, mod), "/")
		if rel == "" {
			rel = "perfspy"
		}
		if strings.HasPrefix(rel, "cmd/") || rel == "targets" || strings.HasPrefix(rel, "targets/") || strings.Contains(rel, "/testdata/") {
			continue
		}
		pkgs = append(pkgs, rel)
	}
	table := tableNames(t, doc)
	// The check, seen failing first: a package the table lacks, a row
	// that is no package.
	if got := tableMismatch([]string{"probe", "planted"}, []string{"probe", "gone"}); !slices.Equal(got, []string{
		"package planted is not in docs/design.md's table", "docs/design.md names gone, which is not a package"}) {
		t.Fatalf("on a planted table: %q", got)
	}
	for _, e := range tableMismatch(pkgs, table) {
		t.Error(e)
	}
}

// TestPackageDocs: every package of the repository (the agent module's
// included, testdata aside) has a doc comment that says what it is for.
func TestPackageDocs(t *testing.T) {
	if got := undocumented(t, map[string][]string{"x": {"package x\n"}, "y": {"// Package y does.\npackage y\n"}}); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("on planted packages: %q", got)
	}
	dirs := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range undocumented(t, dirs) {
		t.Errorf("package in %s has no doc comment (// Package NAME ... or // Command NAME ...)", d)
	}
}

// undocumented lists the folders none of whose files has a package doc
// comment.
func undocumented(t *testing.T, dirs map[string][]string) []string {
	var out []string
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		documented := false
		for _, src := range dirs[dir] {
			f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
				documented = true
				break
			}
		}
		if !documented {
			out = append(out, dir)
		}
	}
	return out
}

// tableMismatch lists the packages the table lacks and the names it has
// that are no package.
func tableMismatch(pkgs, table []string) []string {
	var errs []string
	for _, p := range pkgs {
		if !slices.Contains(table, p) {
			errs = append(errs, "package "+p+" is not in docs/design.md's table")
		}
	}
	for _, n := range table {
		if n != "targets/..." && !slices.Contains(pkgs, n) {
			errs = append(errs, "docs/design.md names "+n+", which is not a package")
		}
	}
	return errs
}

// tableNames are the backticked names in the first column of the table
// "Each package in one line".
func tableNames(t *testing.T, doc string) []string {
	_, sec, ok := strings.Cut(doc, "## Each package in one line")
	if !ok {
		t.Fatal("docs/design.md has no section \"Each package in one line\"")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var names []string
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "package" {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// TestDesignSteps: the steps the map lists for a build and for a run's
// results are the code's, in its order.
func TestDesignSteps(t *testing.T) {
	doc := readDoc(t)
	for _, c := range []struct {
		file, docRE string
	}{
		{"internal/withagent/build.go", "a `builder` of steps ((?:`\\w+`,?\\s*)+)"},
		{"probe/results.go", "then the\\s+steps ((?:`\\w+`,?\\s*)+)"},
	} {
		m := regexp.MustCompile(c.docRE).FindStringSubmatch(doc)
		if m == nil {
			t.Errorf("docs/design.md lists no steps for %s (%s)", c.file, c.docRE)
			continue
		}
		var docSteps []string
		for _, w := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(m[1], -1) {
			docSteps = append(docSteps, w[1])
		}
		if code := codeSteps(t, c.file); !slices.Equal(docSteps, code) {
			t.Errorf("docs/design.md lists the steps of %s as %v; the code runs %v", c.file, docSteps, code)
		}
	}
}

// codeSteps are the method names of the composite literal assigned to
// `steps` in file, in order.
func codeSteps(t *testing.T, file string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
			return true
		}
		if id, ok := as.Lhs[0].(*ast.Ident); !ok || id.Name != "steps" {
			return true
		}
		if cl, ok := as.Rhs[0].(*ast.CompositeLit); ok {
			for _, e := range cl.Elts {
				if sel, ok := e.(*ast.SelectorExpr); ok {
					out = append(out, sel.Sel.Name)
				}
			}
		}
		return false
	})
	if len(out) == 0 {
		t.Fatalf("%s: no steps := []func...{...}", file)
	}
	return out
}

// TestFunctionSize holds the limit the map claims: every function and
// method of the module (tests and test data aside) is under 100 lines and
// takes at most 6 parameters.
func TestFunctionSize(t *testing.T) {
	// The check itself, on a planted tree: a long function, one with too
	// many parameters, and the same in places the rule passes over.
	plant := t.TempDir()
	long := "package p\n\nfunc long() {\n" + strings.Repeat("\tprintln()\n", 98) + "}\n"
	wide := "package p\n\nfunc wide(a, b, c, d, e, f, g int) {}\n"
	for name, src := range map[string]string{
		"p/long.go": long, "p/wide.go": wide,
		"p/long_test.go": long, "p/testdata/wide.go": wide, ".hidden/wide.go": wide, "results/wide.go": wide,
	} {
		if err := os.MkdirAll(filepath.Join(plant, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plant, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := oversized(plant)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"p/long.go:3:1: long is 100 lines with 0 parameters", "p/wide.go:3:1: wide is 1 lines with 7 parameters"}; !slices.Equal(got, want) {
		t.Fatalf("on the planted tree: %q, want %q", got, want)
	}

	got, err = oversized(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		t.Errorf("%s (the limit: under 100 lines, at most 6 parameters)", f)
	}
}

// oversized lists the functions under root, tests and testdata aside,
// of 100 lines or more or with more than 6 parameters.
func oversized(root string) ([]string, error) {
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || d.Name() == "results") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			pos := fset.Position(fd.Pos())
			lines := fset.Position(fd.End()).Line - pos.Line + 1
			params := 0
			for _, field := range fd.Type.Params.List {
				params += max(len(field.Names), 1)
			}
			if lines >= 100 || params > 6 {
				found = append(found, fmt.Sprintf("%s:%d:%d: %s is %d lines with %d parameters", filepath.ToSlash(rel), pos.Line, pos.Column, fd.Name.Name, lines, params))
			}
		}
		return nil
	})
	return found, err
}

func readDoc(t *testing.T) string {
	b, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDesignImports: every arrow of the map's drawing holds in go list
// -deps, and every package that imports another of the module's stands
// left of an arrow. Seen failing first on a planted drawing.
func TestDesignImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/perfspy/perfspy"
	name := func(p string) string {
		if p == mod {
			return "perfspy"
		}
		return strings.TrimPrefix(p, mod+"/")
	}
	g := graph{pkgs: map[string]bool{}, deps: map[string][]string{}, importers: map[string]bool{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		p := name(f[0])
		if strings.HasPrefix(p, "targets") || strings.Contains(p, "/testdata/") {
			continue
		}
		g.pkgs[p] = true
		for _, d := range strings.Fields(f[2]) {
			if d == mod || strings.HasPrefix(d, mod+"/") {
				g.deps[p] = append(g.deps[p], name(d))
			}
		}
		for _, d := range strings.Fields(f[1]) {
			if d == mod || strings.HasPrefix(d, mod+"/") {
				g.importers[p] = true
			}
		}
	}
	planted := "    probe ──> load ──> wirefmt/frame\n    profkey ──> probe   (upside down)\n"
	errs := g.check(planted)
	for _, want := range []string{`"profkey ──> probe": probe is not among profkey's dependencies`, "nothing in the drawing says what agent imports"} {
		if !slices.Contains(errs, want) {
			t.Fatalf("on a planted drawing: %q, want among them %q", errs, want)
		}
	}
	doc := readDoc(t)
	_, sec, _ := strings.Cut(doc, "## Packages and their imports")
	sec, _, _ = strings.Cut(sec, "\n## ")
	for _, e := range g.check(sec) {
		t.Error("docs/design.md: " + e)
	}
}

// graph is the module's packages: each one's dependencies among them
// (go list -deps), and which import any of them.
type graph struct {
	pkgs      map[string]bool
	deps      map[string][]string
	importers map[string]bool
}

// check reads the drawing's chains (indented lines with arrows) and
// lists what does not hold.
func (g graph) check(drawing string) []string {
	var errs []string
	left := map[string]bool{}
	comment := regexp.MustCompile(`\([^)]*\)`)
	for _, line := range strings.Split(drawing, "\n") {
		if !strings.HasPrefix(line, "    ") || !strings.Contains(line, "──>") {
			continue
		}
		var groups [][]string
		for _, part := range strings.Split(comment.ReplaceAllString(line, ""), "──>") {
			var names []string
			for _, n := range strings.Split(part, ",") {
				if n = strings.TrimSpace(n); n != "" && !strings.Contains(n, "*") {
					names = append(names, n)
				}
			}
			groups = append(groups, names)
		}
		for i := 0; i+1 < len(groups); i++ {
			for _, a := range groups[i] {
				left[a] = true
				if !g.pkgs[a] {
					errs = append(errs, fmt.Sprintf("%q: %s is not a package", strings.TrimSpace(line), a))
					continue
				}
				for _, b := range groups[i+1] {
					if !g.pkgs[b] {
						errs = append(errs, fmt.Sprintf("%q: %s is not a package", strings.TrimSpace(line), b))
					} else if !slices.Contains(g.deps[a], b) {
						errs = append(errs, fmt.Sprintf("%q: %s is not among %s's dependencies", strings.TrimSpace(comment.ReplaceAllString(line, "")), b, a))
					}
				}
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(g.importers)) {
		if !left[p] {
			errs = append(errs, "nothing in the drawing says what "+p+" imports")
		}
	}
	return errs
}

// TestDocLinks: every relative link of the README and docs/ leads to a
// file that exists and, with a #fragment, to a heading of it (GitHub's
// anchors).
func TestDocLinks(t *testing.T) {
	files, _ := filepath.Glob("docs/*.md")
	files = append(files, "README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	headings := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
				a[slug(h)] = true
			}
		}
		anchors[path] = a
		return a
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %s: no file %s", f, target, dest)
				continue
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !headings(dest)[frag] {
				t.Errorf("%s: link %s: no heading #%s in %s", f, target, frag, dest)
			}
		}
	}
}

// slug is GitHub's anchor of a heading: lower case, spaces to hyphens,
// punctuation dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
