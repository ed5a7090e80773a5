package copyspy

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/gorelease"
)

// TestOverlayReleases is the layout test of every supported release, for
// each architecture the overlay knows (GOROOT holds every architecture's
// files): the GOROOT files must have the shape the patch expects. It
// fails loudly on a Go release that changed them.
func TestOverlayReleases(t *testing.T) {
	for _, rel := range gorelease.Supported {
		goroot, err := gorelease.GOROOT(rel)
		if err != nil {
			t.Fatal(err)
		}
		for _, arch := range []string{"amd64", "arm64"} {
			t.Run(rel+"/"+arch, func(t *testing.T) { checkOverlay(t, goroot, arch) })
		}
	}
}

func checkOverlay(t *testing.T, goroot, arch string) {
	dir := t.TempDir()
	ov, err := Overlay(goroot, arch, dir)
	if err != nil {
		t.Fatalf("overlay for %s: %v", goroot, err)
	}
	// The two patched assembly files, the two added, and the request
	// mark's ten (routes.RuntimeOverlay).
	if len(ov) != 14 {
		t.Errorf("overlay has %d entries, want 14: %v", len(ov), ov)
	}
	if ov[filepath.Join(goroot, "src", "runtime", "zz_copyspy_"+arch+".s")] == "" {
		t.Errorf("no recorder for %s in %v", arch, ov)
	}
	for _, p := range patches[arch] {
		orig, _ := os.ReadFile(filepath.Join(goroot, "src", "runtime", p.file))
		got, err := os.ReadFile(filepath.Join(dir, p.file))
		if err != nil {
			t.Fatal(err)
		}
		// Exactly: go_asm.h before textflag.h where asked, and the entry
		// line made frameless with the call on the line after it.
		var want []string
		entries := 0
		for _, l := range strings.Split(string(orig), "\n") {
			switch {
			case p.asmH && l == `#include "textflag.h"`:
				want = append(want, `#include "go_asm.h"`, l)
			case strings.TrimSpace(l) == p.entry:
				want = append(want, p.frameless, p.call)
				entries++
			default:
				want = append(want, l)
			}
		}
		if entries != 1 || string(got) != strings.Join(want, "\n") {
			t.Errorf("%s: the patched file is not the original with the entry line's edit (%d entries)", p.file, entries)
		}
	}
}

func TestOverlayRefusesUnknownShapes(t *testing.T) {
	if _, err := Overlay(t.TempDir(), "riscv64", t.TempDir()); !isShape(err) || !strings.Contains(err.Error(), "riscv64") {
		t.Errorf("riscv64: %v", err)
	}
	if _, err := Overlay(t.TempDir(), "amd64", t.TempDir()); !isShape(err) {
		t.Errorf("empty GOROOT: %v", err)
	}
	mm := patches["amd64"][0]
	good := "#include \"textflag.h\"\n\n" + mm.entry + "\n\t// AX = to\n\t// BX = from\n\t// CX = n\n\tMOVQ\tAX, DI\n"
	if _, err := applyPatch(good, mm); err != nil {
		t.Fatalf("good shape: %v", err)
	}
	for name, src := range map[string]string{
		"entry renamed":     strings.Replace(good, "memmove<ABIInternal>", "memmove", 1),
		"frame grew":        strings.Replace(good, "$0-24", "$8-24", 1),
		"registers changed": strings.Replace(good, "// CX = n", "// DX = n", 1),
		"entry twice":       good + mm.entry + "\n",
	} {
		if _, err := applyPatch(src, mm); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A GOROOT whose file has an unknown shape names the file.
	root := t.TempDir()
	rt := filepath.Join(root, "src", "runtime")
	os.MkdirAll(rt, 0o755)
	os.WriteFile(filepath.Join(root, "VERSION"), []byte("go1.27.3\n"), 0o644)
	os.WriteFile(filepath.Join(rt, "memmove_amd64.s"), []byte("TEXT runtime·memmove(SB), NOSPLIT, $0-24\n"), 0o644)
	if _, err := Overlay(root, "amd64", t.TempDir()); !isShape(err) || !strings.Contains(err.Error(), "memmove_amd64.s") {
		t.Errorf("unknown shape: %v", err)
	}
}

func FuzzApplyPatch(f *testing.F) {
	mm := patches["amd64"][0]
	f.Add(mm.entry + "\n// AX = to\n// BX = from\n// CX = n\nRET\n")
	f.Add("TEXT x(SB)\n")
	f.Fuzz(func(t *testing.T, src string) {
		out, err := applyPatch(src, mm)
		if err != nil {
			return
		}
		if strings.Count(out, mm.call) != strings.Count(src, mm.call)+1 {
			t.Fatalf("patched output does not add exactly one call")
		}
		if len(strings.Split(out, "\n")) != len(strings.Split(src, "\n"))+1 {
			t.Fatalf("patched output changes the line count by other than one")
		}
	})
}

// TestSlotLayout checks that the runtime file and agent/copytable agree on
// the table's layout: inproc reads each slot as 16 words.
func TestSlotLayout(t *testing.T) {
	fset := token.NewFileSet()
	rt, err := parser.ParseFile(fset, "zz_copyspy.go", runtimeGo, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var fields []string
	ast.Inspect(rt, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if i < len(n.Values) {
					if bl, ok := n.Values[i].(*ast.BasicLit); ok {
						consts[name.Name] = bl.Value
					} else if be, ok := n.Values[i].(*ast.BinaryExpr); ok {
						consts[name.Name] = exprString(be)
					}
				}
			}
		case *ast.TypeSpec:
			if n.Name.Name == "copyspySlot" {
				for _, f := range n.Type.(*ast.StructType).Fields.List {
					for _, name := range f.Names {
						fields = append(fields, name.Name+" "+exprString(f.Type))
					}
				}
			}
		}
		return true
	})
	want := []string{"key uint64", "_ uint64", "route uint64", "_ [4]uint64", "kind uint64", "calls [4]uint64", "bytes [4]uint64"}
	if strings.Join(fields, "; ") != strings.Join(want, "; ") {
		t.Errorf("copyspySlot fields = %q, want %q", fields, want)
	}
	inproc, err := os.ReadFile("../agent/copytable/copytable.go")
	if err != nil {
		t.Fatal(err)
	}
	num := func(src, name string) int {
		m := regexp.MustCompile(`(?m)^\s*` + name + `\s*=\s*(\d+)`).FindStringSubmatch(src)
		if m == nil {
			t.Fatalf("inproc: no constant %s", name)
		}
		v, _ := strconv.Atoi(m[1])
		return v
	}
	depth, _ := strconv.Atoi(consts["copyspyDepth"])
	if got := num(string(inproc), "depth"); got != depth {
		t.Errorf("inproc depth %d, runtime copyspyDepth %d", got, depth)
	}
	if got, want := num(string(inproc), "words"), 1+6+1+4+4; got != want {
		t.Errorf("inproc words %d, runtime slot has %d words", got, want)
	}
	if consts["copyspySlots"] != "1 << 14" {
		t.Errorf("copyspySlots = %q; inproc sizes its buffer from copyspyLayout, check it", consts["copyspySlots"])
	}
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.BasicLit:
		return e.Value
	case *ast.ArrayType:
		return "[" + exprString(e.Len) + "]" + exprString(e.Elt)
	case *ast.BinaryExpr:
		return exprString(e.X) + " " + e.Op.String() + " " + exprString(e.Y)
	}
	return "?"
}

// TestRecorderRegisters is the register contract of the recorder: it may
// write only the scratch registers, and AX (CMPXCHGQ's comparand) only
// where it is saved in SI and restored.
func TestRecorderRegisters(t *testing.T) {
	allowed := map[string]bool{"DX": true, "SI": true, "DI": true, "R8": true, "R9": true, "R10": true, "R11": true, "R12": true, "R13": true}
	writes := regexp.MustCompile(`^\s*(MOVQ|MOVL|XORQ|IMULQ|IMUL3Q|SUBQ|ADDQ|ANDQ|ORQ|SHRQ|SHLQ|INCQ|DECQ|LEAQ|XADDQ|CMPXCHGQ)\s+(.*)$`)
	saved := false
	for i, line := range strings.Split(runtimeAsm["amd64"], "\n") {
		line = strings.TrimSpace(strings.SplitN(line, "//", 2)[0])
		m := writes.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ops := strings.Split(m[2], ",")
		dst := strings.TrimSpace(ops[len(ops)-1])
		if strings.Contains(dst, "(") {
			continue // a memory destination
		}
		switch {
		case line == "MOVQ\tAX, SI":
			saved = true
		case dst == "AX":
			if !saved && line != "MOVQ\tSI, AX" {
				t.Errorf("line %d writes AX before saving it: %q", i+1, line)
			}
		case !allowed[dst]:
			t.Errorf("line %d writes %s, which callers of memmove keep: %q", i+1, dst, line)
		}
	}
	if !saved {
		t.Error("the recorder never saves AX before CMPXCHGQ")
	}
}

// TestRecorderRegistersARM64 is the arm64 recorder's contract: it writes
// only R4-R15, which memmove itself uses; never R0-R2 (the arguments) nor
// R3 (the return address the patched line saved), and no other register.
func TestRecorderRegistersARM64(t *testing.T) {
	allowed := map[string]bool{}
	for r := 4; r <= 15; r++ {
		allowed["R"+strconv.Itoa(r)] = true
	}
	inst := regexp.MustCompile(`^(?:[a-z0-9]+:\s*)?([A-Z]+[0-9]*W?)\s+(.*)$`)
	n := 0
	for i, line := range strings.Split(runtimeAsm["arm64"], "\n") {
		line = strings.TrimSpace(strings.SplitN(line, "//", 2)[0])
		m := inst.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "TEXT") || strings.HasPrefix(line, "#") {
			continue
		}
		switch m[1] {
		case "B", "BEQ", "BNE", "BLO", "BHI", "BHS", "CBZ", "CBZW", "CBNZ", "CBNZW", "TBZ", "CMP", "CMPW", "TST", "STLR", "CLREX", "RET":
			continue // no register written
		}
		ops := strings.Split(m[2], ",")
		dst := strings.TrimSpace(ops[len(ops)-1])
		if strings.Contains(dst, "(") {
			continue // a memory destination
		}
		n++
		if !allowed[dst] {
			t.Errorf("line %d writes %s, outside R4-R15: %q", i+1, dst, line)
		}
	}
	if n < 40 {
		t.Errorf("only %d register writes found: the parse missed the recorder", n)
	}
}

// isShape tells the one error of a Go release an overlay does not know.
func isShape(err error) bool {
	var se *capability.ShapeError
	return errors.As(err, &se) && errors.Is(err, capability.ErrNotSupported)
}
