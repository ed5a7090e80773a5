// Package allocspy counts heap allocations per call site, exactly, at a cost
// close to an uninstrumented run.
//
// Overlay patches the local GOROOT's runtime/malloc.go so that mallocgc,
// through which every heap allocation passes in Go 1.26 (newobject,
// makeslice, growslice, the string conversions), calls allocspyRecord on its
// way out, and adds the recorder: a lock-free table keyed by a hash of
// mallocgc's caller and the frame-pointer chain above it. agent/alloctable,
// added to the target's package main, reads the table for the probe agent.
//
// What is counted, per site: objects as the program asked for them (every
// mallocgc call), the blocks among them that took a heap slot of their own
// (the tiny allocator packs small pointer-free objects into 16-byte blocks:
// those objects take no block), the bytes asked for, and the bytes taken
// (the size class). The heap profile at MemProfileRate=1 counts blocks and
// bytes taken; the two agree exactly per site.
package allocspy

import (
	_ "embed"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/routes"
)

//go:embed runtime/zz_allocspy.go.txt
var runtimeGo string

// The last lines of mallocgc, and what the last one becomes. The call goes
// on the same line, so that line numbers in malloc.go do not move.
const (
	tailContext = "\t// Post-malloc debug hooks.\n\tif debug.malloc {\n\t\tpostMallocgcDebug(x, elemsize, typ)\n\t}\n"
	tailReturn  = "\treturn x\n}\n"
	tailPatched = "\tif perfspyGate != 0 && allocspyOn != 0 && (allocspyOn == 1 || getg().perfspyMark&perfspySampledBit != 0) { allocspyRecord(size, elemsize) }; return x\n}\n"
)

// knownReturns are the return statements mallocgc may have; any other means
// a release whose allocation entry changed.
var knownReturns = map[string]int{
	"unsafe.Pointer(&zerobase)":                    1, // size 0: no allocation
	"mallocNoScanTable[size](size, typ, needzero)": 1, // sizespecializedmalloc only
	"mallocScanTable[size](size, typ, needzero)":   1, // sizespecializedmalloc only
	"x": 2, // the debug.malloc hook, and the end
}

// Overlay writes the patched runtime files into dir and returns the
// go build -overlay Replace entries, keyed by GOROOT paths. goexperiment is
// `go env GOEXPERIMENT`.
func Overlay(goroot, goarch, goexperiment, dir string) (map[string]string, error) {
	if goarch != "amd64" && goarch != "arm64" {
		return nil, capability.Shape("allocspy overlay", "GOARCH=%s needs frame pointers (amd64, arm64)", goarch)
	}
	for _, e := range strings.Split(goexperiment, ",") {
		if strings.TrimSpace(e) == "sizespecializedmalloc" {
			return nil, capability.Shape("allocspy overlay", "GOEXPERIMENT=sizespecializedmalloc makes the compiler call size-specialized allocators that bypass mallocgc")
		}
	}
	rt := filepath.Join(goroot, "src", "runtime")
	src := filepath.Join(rt, "malloc.go")
	b, err := os.ReadFile(src)
	if err != nil {
		return nil, capability.Shape("allocspy overlay", "%v", err)
	}
	patched, err := patchMalloc(string(b))
	if err != nil {
		return nil, capability.Shape("allocspy overlay", "%s: %v (a Go release this overlay does not know)", src, err)
	}
	out := map[string]string{}
	dst := filepath.Join(dir, "malloc.go")
	if err := os.WriteFile(dst, []byte(patched), 0o644); err != nil {
		return nil, err
	}
	out[src] = dst
	name := "zz_allocspy.go"
	if _, err := os.Stat(filepath.Join(rt, name)); err == nil {
		return nil, capability.Shape("allocspy overlay", "%s already exists in GOROOT", name)
	}
	dst = filepath.Join(dir, name)
	if err := os.WriteFile(dst, []byte(runtimeGo), 0o644); err != nil {
		return nil, err
	}
	out[filepath.Join(rt, name)] = dst
	// The recorder keys sites by the request mark.
	mark, err := routes.RuntimeOverlay(goroot, dir)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, mark)
	return out, nil
}

// patchMalloc checks mallocgc's shape and adds the call on its last line.
func patchMalloc(src string) (string, error) {
	if err := checkMallocgc(src); err != nil {
		return "", err
	}
	at := strings.Index(src, tailContext+tailReturn)
	if at < 0 {
		return "", errors.New("mallocgc does not end with the post-malloc debug hook and return x")
	}
	if strings.Count(src, tailContext+tailReturn) != 1 {
		return "", errors.New("mallocgc's ending appears more than once")
	}
	i := at + len(tailContext)
	return src[:i] + tailPatched + src[i+len(tailReturn):], nil
}

// checkMallocgc is the layout check: mallocgc(size uintptr, typ *_type,
// needzero bool) unsafe.Pointer declares elemsize, and returns only where
// this patch expects.
func checkMallocgc(src string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "malloc.go", src, 0)
	if err != nil {
		return err
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "mallocgc" {
			fn = fd
		}
	}
	if fn == nil || fn.Body == nil {
		return errors.New("no func mallocgc")
	}
	if sig := nodeString(fset, fn.Type); sig != "func(size uintptr, typ *_type, needzero bool) unsafe.Pointer" {
		return fmt.Errorf("mallocgc's signature is %q", sig)
	}
	hasElemsize := false
	seen := map[string]int{}
	var bad error
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // returns of closures are not mallocgc's
		case *ast.ValueSpec:
			for _, name := range n.Names {
				hasElemsize = hasElemsize || name.Name == "elemsize"
			}
		case *ast.ReturnStmt:
			if len(n.Results) != 1 {
				bad = fmt.Errorf("mallocgc has a return of %d values", len(n.Results))
				return false
			}
			s := nodeString(fset, n.Results[0])
			if _, ok := knownReturns[s]; !ok {
				bad = fmt.Errorf("mallocgc has an unknown return %q", s)
			}
			seen[s]++
		}
		return true
	})
	if bad != nil {
		return bad
	}
	if !hasElemsize {
		return errors.New("mallocgc declares no elemsize")
	}
	for _, s := range slices.Sorted(maps.Keys(seen)) {
		if n := seen[s]; n > knownReturns[s] {
			return fmt.Errorf("mallocgc returns %q %d times, expected at most %d", s, n, knownReturns[s])
		}
	}
	return nil
}

func nodeString(fset *token.FileSet, n ast.Node) string {
	var b strings.Builder
	printer.Fprint(&b, fset, n)
	return b.String()
}
