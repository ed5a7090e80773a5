// Package golden compares test output with checked-in golden files. With
// update set (the tests' -update flag) it rewrites them; on a mismatch it
// writes the output next to the golden file as NAME.got, to diff.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check compares got with the file at path.
func Check(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		os.WriteFile(path+".got", got, 0o644)
		t.Errorf("%s differs from the golden file; see %s.got", path, path)
	}
}

// CheckBlock compares the part of the file at path between the lines
// begin and end (a document's generated table, a README's example) with
// block; with update it rewrites that part only.
func CheckBlock(t testing.TB, path, begin, end, block string, update bool) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok1 := strings.Cut(string(doc), begin)
	_, tail, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %q ... %q", path, begin, end)
	}
	Check(t, path, []byte(head+begin+block+end+tail), update)
}
