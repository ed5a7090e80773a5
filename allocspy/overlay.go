// Package allocspy counts heap allocations per call site, exactly, at a cost
// close to an uninstrumented run.
//
// Overlay patches the local GOROOT's runtime/malloc.go so that mallocgc,
// through which every heap allocation passes in Go 1.26 (newobject,
// makeslice, growslice, the string conversions), calls allocspyRecord on its
// way out, and on Go 1.27 the size-specialized allocators too (mallocgc's
// dispatch for small sizes and the compiler's direct calls; see
// release_go127.go), and adds the recorder: a lock-free table keyed by a hash of
// mallocgc's caller and the frame-pointer chain above it. agent/alloctable,
// added to the target's package main, reads the table for the probe agent.
//
// What is counted, per site: objects as the program asked for them (every
// mallocgc call), the blocks among them that took a heap slot of their own
// (the tiny allocator packs small pointer-free objects into 16-byte blocks:
// those objects take no block), the bytes asked for, and the bytes taken
// (the size class). The heap profile at MemProfileRate=1 counts blocks and
// bytes taken; the two agree exactly per site.
//
// For probe run -bench, the recorder can also track, by address, each heap
// block a benchmark's timed region makes (allocspyLiveStart,
// allocspyLiveRead): after the GCs, the blocks whose heap slots are still
// allocated are what the ops left live, by site, without the heap profile
// (benchwin.LiveEnv).
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
	"github.com/perfspy/perfspy/internal/gorelease"
	"github.com/perfspy/perfspy/routes"
)

//go:embed runtime/zz_allocspy.go.txt
var runtimeGo string

// runtimeOS are the recorder's files for one OS or the others (their
// names' suffix and build line choose).
//
//go:embed runtime/zz_allocspy_linux.go.txt
var runtimeLinux string

//go:embed runtime/zz_allocspy_other.go.txt
var runtimeOther string

// The last lines of mallocgc, and what the last one becomes. The call goes
// on the same line, so that line numbers in malloc.go do not move.
const (
	tailContext = "\t// Post-malloc debug hooks.\n\tif debug.malloc {\n\t\tpostMallocgcDebug(x, elemsize, typ)\n\t}\n"
	tailReturn  = "\treturn x\n}\n"
	tailPatched = "\t" + recordCall0 + "return x\n}\n"
)

// recordCall0 is the recorder's call where an allocation entry returns,
// gated so that a build with the recorder off pays one load (perfspyGate,
// which every switch below raises while it is on); recordCall1
// is the same from a slow path, one frame below the entry.
const (
	recordGate  = "if perfspyGate != 0 && (allocspyOn == 1 || allocspyLive != 0 || allocspyOn == 2 && getg().perfspyMark&perfspySampledBit != 0) { "
	recordCall0 = recordGate + "allocspyRecord(x, size, elemsize, 0) }; "
	recordCall1 = recordGate + "allocspyRecord(x, size, elemsize, 1) }; "
)

// withoutOverlay is what a run does when this overlay cannot be built.
const withoutOverlay = "allocations fall back to the heap profile at MemProfileRate=1, which counts blocks, not the objects the tiny allocator packs"

// Overlay writes the patched runtime files into dir and returns the
// go build -overlay Replace entries, keyed by GOROOT paths. goexperiment is
// `go env GOEXPERIMENT`. The GOROOT's release picks the shapes expected
// (releases); a release with no entry is refused by name.
func Overlay(goroot, goarch, goexperiment, dir string) (map[string]string, error) {
	if goarch != "amd64" && goarch != "arm64" {
		return nil, capability.Shape("allocspy overlay", "GOARCH=%s needs frame pointers (amd64, arm64)", goarch)
	}
	rel, err := gorelease.Of("allocspy overlay", goroot, withoutOverlay, slices.Sorted(maps.Keys(releases)))
	if err != nil {
		return nil, err
	}
	r := releases[rel]
	for _, e := range strings.Split(goexperiment, ",") {
		if e = strings.TrimSpace(e); e != "" && e == r.refusedExperiment {
			return nil, capability.Shape("allocspy overlay", "GOEXPERIMENT=%s on %s makes the compiler call size-specialized allocators this overlay does not patch on that release", e, rel)
		}
	}
	rt := filepath.Join(goroot, "src", "runtime")
	out := map[string]string{}
	patch := func(name string, do func(string) (string, error)) error {
		src := filepath.Join(rt, name)
		b, err := os.ReadFile(src)
		if err != nil {
			return capability.Shape("allocspy overlay", "%v", err)
		}
		patched, err := do(string(b))
		if err != nil {
			return capability.Shape("allocspy overlay", "%s: %v (%s's shape changed: a Go build this overlay does not know)", src, err, rel)
		}
		dst := filepath.Join(dir, name)
		if err := os.WriteFile(dst, []byte(patched), 0o644); err != nil {
			return err
		}
		out[src] = dst
		return nil
	}
	if err := patch("malloc.go", func(s string) (string, error) { return patchMalloc(s, r) }); err != nil {
		return nil, err
	}
	if g := r.generated; g != nil {
		if err := patch(g.file, func(s string) (string, error) { return patchGenerated(s, g) }); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct{ name, src string }{{"zz_allocspy.go", runtimeGo}, {"zz_allocspy_linux.go", runtimeLinux}, {"zz_allocspy_other.go", runtimeOther}} {
		if _, err := os.Stat(filepath.Join(rt, f.name)); err == nil {
			return nil, capability.Shape("allocspy overlay", "%s already exists in GOROOT", f.name)
		}
		dst := filepath.Join(dir, f.name)
		if err := os.WriteFile(dst, []byte(f.src), 0o644); err != nil {
			return nil, err
		}
		out[filepath.Join(rt, f.name)] = dst
	}
	// The recorder keys sites by the request mark.
	mark, err := routes.RuntimeOverlay(goroot, dir)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, mark)
	return out, nil
}

// patchMalloc checks mallocgc's shape and adds the call on its last line.
func patchMalloc(src string, r *release) (string, error) {
	if err := checkMallocgc(src, r); err != nil {
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
// the release's entry expects.
func checkMallocgc(src string, r *release) error {
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
	if sig := nodeString(fset, fn.Type); sig != allocspySignature {
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
			if _, ok := r.mallocgcReturns[s]; !ok {
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
		if n := seen[s]; n > r.mallocgcReturns[s] {
			return fmt.Errorf("mallocgc returns %q %d times, expected at most %d", s, n, r.mallocgcReturns[s])
		}
	}
	return nil
}

// patchGenerated checks the size-specialized allocators' shape and puts
// the recorder's call before each return of an object, on its line.
func patchGenerated(src string, g *generatedShape) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, g.file, src, 0)
	if err != nil {
		return "", err
	}
	type insert struct {
		at   int
		text string
	}
	var inserts []insert
	var entries, slow int
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		call := recordCall0
		switch {
		case g.entries.MatchString(name):
			entries++
			if sig := nodeString(fset, fd.Type); sig != allocspySignature {
				return "", fmt.Errorf("%s's signature is %q", name, sig)
			}
		case g.slowPaths.MatchString(name):
			slow++
			call = recordCall1
		default:
			return "", fmt.Errorf("unknown allocator %s", name)
		}
		records := 0
		var bad error
		debugHook := map[*ast.ReturnStmt]bool{}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.IfStmt:
				// if x := preMallocgcDebug(size, typ); x != nil { return x }
				if as, ok := n.Init.(*ast.AssignStmt); ok && len(as.Rhs) == 1 && strings.HasPrefix(nodeString(fset, as.Rhs[0]), "preMallocgcDebug(") {
					for _, st := range n.Body.List {
						if rs, ok := st.(*ast.ReturnStmt); ok {
							debugHook[rs] = true
						}
					}
				}
			case *ast.ReturnStmt:
				if len(n.Results) != 1 {
					bad = fmt.Errorf("%s has a return of %d values", name, len(n.Results))
					return false
				}
				s := nodeString(fset, n.Results[0])
				rec, ok := g.returns[s]
				if !ok {
					bad = fmt.Errorf("%s has an unknown return %q", name, s)
					return false
				}
				if rec && !debugHook[n] {
					inserts = append(inserts, insert{fset.Position(n.Pos()).Offset, call})
					records++
				}
			}
			return true
		})
		if bad != nil {
			return "", bad
		}
		if records == 0 {
			return "", fmt.Errorf("%s returns no object of its own", name)
		}
	}
	if entries != g.nEntries || slow != g.nSlow || len(inserts) != g.nRecords {
		return "", fmt.Errorf("%d allocators, %d slow paths and %d returns of an object, expected %d, %d and %d", entries, slow, len(inserts), g.nEntries, g.nSlow, g.nRecords)
	}
	var b strings.Builder
	last := 0
	for _, in := range inserts { // in file order: Decls and Inspect both are
		b.WriteString(src[last:in.at])
		b.WriteString(in.text)
		last = in.at
	}
	b.WriteString(src[last:])
	return b.String(), nil
}

func nodeString(fset *token.FileSet, n ast.Node) string {
	var b strings.Builder
	printer.Fprint(&b, fset, n)
	return b.String()
}
