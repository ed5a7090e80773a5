package allocspy

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/agent/wire"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/gorelease"
)

func goEnv(t *testing.T, keys ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"env"}, keys...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// TestOverlayReleases is the layout test of every release the overlay
// knows, against that release's GOROOT: mallocgc and (Go 1.27) the
// size-specialized allocators must have the shape the entry expects. It
// fails loudly on a release whose allocation entries changed.
func TestOverlayReleases(t *testing.T) {
	goarch := goEnv(t, "GOARCH")[0]
	for _, rel := range gorelease.Supported {
		t.Run(rel, func(t *testing.T) {
			goroot, err := gorelease.GOROOT(rel)
			if err != nil {
				t.Fatalf("the GOROOT of %s: %v", rel, err)
			}
			dir := t.TempDir()
			ov, err := Overlay(goroot, goarch, "", dir)
			if err != nil {
				t.Fatalf("allocspy overlay for %s: %v", rel, err)
			}
			r := releases[rel]
			// malloc.go and zz_allocspy.go (with its _linux.go and
			// _other.go), malloc_generated.go where the size-specialized
			// allocators are reached, and the request mark's ten
			// (routes.RuntimeOverlay): runtime2.go, proc.go, chan.go,
			// select.go, sema.go, time.go, zz_perfspy_mark.go,
			// zz_perfspy_hand.go, syscall_linux.go and its declaration.
			want := 14
			if r.generated != nil {
				want++
			}
			if len(ov) != want {
				t.Errorf("overlay has %d entries, want %d", len(ov), want)
			}
			calls := checkLines(t, goroot, dir, "malloc.go")
			if calls != 1 {
				t.Errorf("malloc.go: %d recorder calls, want 1", calls)
			}
			if g := r.generated; g != nil {
				calls := checkLines(t, goroot, dir, g.file)
				if want := g.nRecords; calls != want {
					t.Errorf("%s: %d recorder calls, want %d", g.file, calls, want)
				}
			}
			got, _ := os.ReadFile(filepath.Join(dir, "malloc.go"))
			if err := checkMallocgc(string(got), r); err != nil {
				t.Errorf("patched mallocgc: %v", err)
			}
		})
	}
}

// checkLines compares a patched runtime file with its original: no line
// moves, and every changed line is the original with a recorder call put
// before its return. It returns the calls.
func checkLines(t *testing.T, goroot, dir, name string) int {
	t.Helper()
	orig, _ := os.ReadFile(filepath.Join(goroot, "src", "runtime", name))
	got, _ := os.ReadFile(filepath.Join(dir, name))
	ol, gl := strings.Split(string(orig), "\n"), strings.Split(string(got), "\n")
	if len(ol) != len(gl) {
		t.Fatalf("%s: %d lines, patched %d: line numbers must not move", name, len(ol), len(gl))
	}
	calls := 0
	for i := range ol {
		if ol[i] == gl[i] {
			continue
		}
		calls++
		trim := strings.TrimLeft(ol[i], "\t")
		indent := ol[i][:len(ol[i])-len(trim)]
		if gl[i] != indent+recordCall0+trim && gl[i] != indent+recordCall1+trim {
			t.Errorf("%s line %d: %q -> %q", name, i+1, ol[i], gl[i])
		}
	}
	return calls
}

// TestOverlayUnknownRelease: a GOROOT of a release with no entry is
// refused by name, saying what still works.
func TestOverlayUnknownRelease(t *testing.T) {
	goroot := t.TempDir()
	if err := os.WriteFile(filepath.Join(goroot, "VERSION"), []byte("go1.28.0\ntime 2027-02-01T00:00:00Z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Overlay(goroot, "amd64", "", t.TempDir())
	if !isShape(err) || !strings.Contains(err.Error(), "go1.28.0") || !strings.Contains(err.Error(), "heap profile") {
		t.Errorf("go1.28: %v", err)
	}
}

const goodMalloc = `package runtime

func mallocgc(size uintptr, typ *_type, needzero bool) unsafe.Pointer {
	if size == 0 {
		return unsafe.Pointer(&zerobase)
	}
	var x unsafe.Pointer
	var elemsize uintptr
	x, elemsize = mallocgcSmallNoscan(size, typ, needzero)
` + tailContext + tailReturn

func TestPatchRefusesUnknownShapes(t *testing.T) {
	if _, err := patchMalloc(goodMalloc, &go126); err != nil {
		t.Fatalf("good shape: %v", err)
	}
	for name, src := range map[string]string{
		"new return":       strings.Replace(goodMalloc, "\tvar x unsafe.Pointer\n", "\tif typ == nil {\n\t\treturn fastPath(size)\n\t}\n\tvar x unsafe.Pointer\n", 1),
		"signature":        strings.Replace(goodMalloc, "needzero bool)", "needzero bool, extra int)", 1),
		"no elemsize":      strings.Replace(strings.Replace(goodMalloc, "\tvar elemsize uintptr\n", "", 1), "x, elemsize =", "x, _ =", 1),
		"ending changed":   strings.Replace(goodMalloc, "postMallocgcDebug(x, elemsize, typ)", "postMallocgcDebug(x, typ)", 1),
		"no mallocgc":      strings.Replace(goodMalloc, "func mallocgc(", "func mallocgc2(", 1),
		"does not compile": goodMalloc + "func {",
	} {
		if _, err := patchMalloc(src, &go126); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	goroot126, err := gorelease.GOROOT("go1.26")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Overlay(goroot126, "amd64", "sizespecializedmalloc", t.TempDir()); !isShape(err) || !strings.Contains(err.Error(), "sizespecializedmalloc") {
		t.Errorf("sizespecializedmalloc: %v", err)
	}
	if _, err := Overlay(t.TempDir(), "386", "", t.TempDir()); !isShape(err) {
		t.Errorf("386: %v", err)
	}
	if _, err := Overlay(t.TempDir(), "amd64", "", t.TempDir()); !isShape(err) || !strings.Contains(err.Error(), "VERSION") {
		t.Errorf("empty GOROOT: %v", err)
	}
}

func FuzzPatchMalloc(f *testing.F) {
	f.Add(goodMalloc)
	f.Add("package runtime\nfunc mallocgc() {}\n")
	f.Fuzz(func(t *testing.T, src string) {
		out, err := patchMalloc(src, &go126)
		if err != nil {
			return
		}
		if strings.Count(out, "\n") != strings.Count(src, "\n") {
			t.Fatal("the patch moved line numbers")
		}
		if strings.Count(out, "allocspyRecord(x, size, elemsize, 0)") != strings.Count(src, "allocspyRecord(x, size, elemsize, 0)")+1 {
			t.Fatal("the patch did not add exactly one call")
		}
	})
}

// TestSlotLayout checks that the runtime file and agent/alloctable agree on
// the table's layout: 16 words a slot.
func TestSlotLayout(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "zz_allocspy.go", runtimeGo, 0)
	if err != nil {
		t.Fatal(err)
	}
	words := 0
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "allocspySlot" {
			return true
		}
		for _, fl := range ts.Type.(*ast.StructType).Fields.List {
			w := 1
			if at, ok := fl.Type.(*ast.ArrayType); ok {
				switch l := at.Len.(type) {
				case *ast.BasicLit:
					w, _ = strconv.Atoi(l.Value)
				}
			}
			for _, nm := range fl.Names {
				names = append(names, nm.Name)
				words += w
			}
		}
		return false
	})
	if want := "key _ route _ objects blocks reqBytes allocBytes _"; strings.Join(names, " ") != want {
		t.Errorf("allocspySlot fields %q, want %q", names, want)
	}
	if words != 16 {
		t.Errorf("allocspySlot is %d words, inproc reads 16", words)
	}
	if !strings.Contains(runtimeGo, "allocspyDepth  = 128 ") {
		t.Error("allocspyDepth is not 128, as inproc assumes")
	}
	src, err := os.ReadFile("../agent/alloctable/alloctable.go")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"depth": "128", "words": "16"} {
		m := regexp.MustCompile(`(?m)^\s*` + name + `\s*=\s*(\d+)`).FindStringSubmatch(string(src))
		if m == nil || m[1] != want {
			t.Errorf("inproc %s = %v, want %s", name, m, want)
		}
	}
}

func TestProfile(t *testing.T) {
	fr := func(pc uint64, fns ...string) wire.PCFrames {
		pf := wire.PCFrames{PC: pc}
		for _, f := range fns {
			pf.Frames = append(pf.Frames, wire.Frame{Func: f, File: "x.go", Line: 1})
		}
		return pf
	}
	rep := &wire.AllocReport{Sites: []wire.AllocSite{
		{Stack: []wire.PCFrames{fr(1, "runtime.makeslice"), fr(2, "main.allocK7"), fr(3, "main.handler")}, Objects: 70, Blocks: 70, ReqBytes: 4480, AllocBytes: 4480},
		{Stack: []wire.PCFrames{fr(4, "runtime.newobject"), fr(5, "strconv.small", "main.tiny")}, Objects: 10, Blocks: 5, ReqBytes: 80, AllocBytes: 80},
	}}
	p := Profile(rep)
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Sample {
		leaf := s.Location[0].Line[0].Function.Name
		switch leaf {
		case "main.allocK7":
			if s.Label["via"][0] != "runtime.makeslice" || s.Value[0] != 70 || s.Value[2] != 70 {
				t.Errorf("allocK7 sample %v %v", s.Value, s.Label)
			}
		case "strconv.small":
			if s.Value[0] != 10 || s.Value[2] != 5 || len(s.Location[0].Line) != 2 {
				t.Errorf("tiny sample %v, lines %d", s.Value, len(s.Location[0].Line))
			}
		default:
			t.Errorf("leaf %s: runtime frames were not trimmed", leaf)
		}
	}
	o, ab, b, rb := Totals(rep)
	if o != 80 || ab != 4560 || b != 75 || rb != 4560 {
		t.Errorf("Totals = %d %d %d %d", o, ab, b, rb)
	}
}

// isShape tells the one error of a Go release an overlay does not know.
func isShape(err error) bool {
	var se *capability.ShapeError
	return errors.As(err, &se) && errors.Is(err, capability.ErrNotSupported)
}
