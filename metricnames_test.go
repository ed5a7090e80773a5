package perfspy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/metric"
)

// TestMetricNamesFromMetric: no package but metric spells a metric's
// written name ("allocs/op", "B/req") as a string of its own: a name
// taken from the table cannot drift from it. Seen failing first on a
// planted file.
func TestMetricNamesFromMetric(t *testing.T) {
	plant := t.TempDir()
	os.MkdirAll(filepath.Join(plant, "p"), 0o755)
	os.WriteFile(filepath.Join(plant, "p", "p.go"), []byte("package p\n\nvar unit = \"B/op\"\n\n// allocs/op in a comment is words.\nvar ok = \"allocs/op of\"\n"), 0o644)
	if got := spelledMetrics(t, plant); !slices.Equal(got, []string{"p/p.go:3: \"B/op\""}) {
		t.Fatalf("on the planted tree: %q", got)
	}
	for _, f := range spelledMetrics(t, ".") {
		t.Errorf("%s: a metric's name spelled outside package metric (use metric.Named or its variables)", f)
	}
}

// spelledMetrics lists the string literals under root, tests, testdata
// and package metric aside, that are exactly a metric's written name.
func spelledMetrics(t *testing.T, root string) []string {
	names := map[string]bool{}
	for _, m := range metric.Table {
		for _, n := range m.Names() {
			names[n] = true
		}
	}
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || d.Name() == "metric" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && names[v] {
					found = append(found, filepath.ToSlash(rel)+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+": "+lit.Value)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
