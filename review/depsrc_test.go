package review

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestWhatChanged reads a dependency's function at both versions from a
// module cache: new, body changed, or the same (the path moved), for a
// method, a closure and a function of a module whose path has capitals.
func TestWhatChanged(t *testing.T) {
	cache := t.TempDir()
	write := func(version, text string) {
		dir := filepath.Join(cache, "example.com/!big/dep@"+version, "codec")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "codec.go"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("v1.0.0", `package codec

type dec struct{ b []byte }

// Decode's comment changes; comments are not the body.
func (d *dec) Decode() []byte { return append(d.b, 1) }

func Same(n int) []int { return make([]int, n) }
`)
	write("v1.1.0", `package codec

type dec struct{ b []byte }

// Decode, reworded.
func (d *dec) Decode() []byte { return append(d.b[:0], 1) }

func Same(n int) []int { return make([]int, n) }

func Fresh() func() *int { return func() *int { return new(int) } }
`)
	c := schema.GoModChange{File: "go.mod", Line: 5, Kind: "require", Path: "example.com/Big/dep", Before: "v1.0.0", After: "v1.1.0"}
	check := func(wants map[string]string) {
		t.Helper()
		for frame, want := range wants {
			if got := whatChanged(cache, c, frame); got != want {
				t.Errorf("%s: %q, want %q", frame, got, want)
			}
		}
	}
	check(map[string]string{
		"example.com/Big/dep/codec.(*dec).Decode": "codec.(*dec).Decode's body changed between v1.0.0 and v1.1.0",
		"example.com/Big/dep/codec.Same":          "codec.Same is the same in both versions: the path to it moved",
		"example.com/Big/dep/codec.Fresh.func1":   "codec.Fresh.func1 is new in v1.1.0",
		"example.com/other.F":                     "",
	})
	// A closure in a package-level variable is compared with the same
	// variable, found by its line, not with a func init: hook changed,
	// keep did not, and fresh is new.
	write("v1.0.0", "package codec\n\nfunc init() { _ = 1 }\n\nvar keep = func() []byte { return nil }\n\nvar hook = func() []byte {\n\treturn make([]byte, 8)\n}\n")
	write("v1.1.0", "package codec\n\nfunc init() { _ = 1 }\n\nvar keep = func() []byte { return nil }\n\nvar hook = func() []byte {\n\treturn make([]byte, 16)\n}\n\nvar fresh = func() []byte { return nil }\n")
	check(map[string]string{
		"example.com/Big/dep/codec.init.func2 (codec.go:8)":                            "codec.init.func2 (the closure in var hook)'s body changed between v1.0.0 and v1.1.0",
		"example.com/Big/dep/codec.init.func1 (/m/codec.go:5; codec.go:5 in the base)": "codec.init.func1 (the closure in var keep) is the same in both versions: the path to it moved",
		"example.com/Big/dep/codec.init.func3 (codec.go:11)":                           "codec.init.func3 (the closure in var fresh) is new in v1.1.0",
		"example.com/Big/dep/codec.init.func3":                                         "",
		"example.com/Big/dep/codec.init.func3 (codec.go:3)":                            "",
	})
	// A go.mod whose path or version climbs out of the cache reads nothing.
	out := filepath.Join(filepath.Dir(cache), "x@v1", "codec")
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "f.go"), []byte("package codec\n\nfunc F() {}\n"), 0o644)
	if got := whatChanged(cache, schema.GoModChange{Kind: "require", Path: "../x", Before: "v1", After: "v1"}, "../x/codec.F"); got != "" {
		t.Errorf("a path out of the cache: %q", got)
	}
	if got := whatChanged(cache, schema.GoModChange{Kind: "go", Path: "go", Before: "1.26", After: "1.27"}, "encoding/json.Marshal"); got != "" {
		t.Errorf("a toolchain change: %q, want nothing", got)
	}
}
