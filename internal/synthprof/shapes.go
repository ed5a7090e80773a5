package synthprof

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Shape is a kind of profile the readers meet: how many samples, how
// deep, over how many functions, and whether every sample ends in a
// location of its own (a profile of many distinct addresses, as a long
// CPU profile of a big binary has).
type Shape struct {
	Name               string
	Samples            int
	MinDepth, MaxDepth int
	Funcs              int
	FreshLeaves        bool
	// Uniform walks take every callee alike, from any of the graph's
	// roots: few samples share a stack past their first frames (a
	// random walk, not a server's hot paths).
	Uniform bool
	// FoldedLines, for the folded shape: lines of folded stacks.
	FoldedLines int
}

// Shapes are the shapes 'probe cost -what flame|allocdiff -shape' runs.
var Shapes = []Shape{
	{Name: "deep", Samples: 100000, MinDepth: 10, MaxDepth: 60, Funcs: 10000},
	{Name: "random-walk", Samples: 100000, MinDepth: 10, MaxDepth: 60, Funcs: 10000, Uniform: true},
	{Name: "shallow-1M", Samples: 1000000, MinDepth: 3, MaxDepth: 8, Funcs: 200000},
	{Name: "locations-1M", Samples: 1000000, MinDepth: 3, MaxDepth: 8, Funcs: 200000, FreshLeaves: true},
	{Name: "folded", FoldedLines: 100000, MinDepth: 10, MaxDepth: 60, Funcs: 10000},
}

// ShapeNamed returns the shape called name.
func ShapeNamed(name string) (Shape, bool) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, true
		}
	}
	return Shape{}, false
}

// Graph is a program's call graph: Go-like functions, each calling a few
// others from call sites of its own, and a few roots. Stacks are walks
// down it that favour each function's first callees, so that samples
// share prefixes as a server's do (a few entry points, hot paths) and
// part ways further down.
type Graph struct {
	names   []string
	files   []string
	callees [][]int32
	inlined []int32 // a function inlined into each call site's caller, or -1
	roots   int
}

// NewGraph makes a call graph of n functions from seed.
func NewGraph(seed int64, n int) *Graph {
	rng := rand.New(rand.NewSource(seed))
	g := &Graph{roots: 16}
	if n < 2*g.roots {
		n = 2 * g.roots
	}
	std := []string{"net/http", "encoding/json", "bufio", "strings", "runtime", "sync", "bytes", "io", "fmt", "strconv", "context", "database/sql", "crypto/tls", "compress/gzip"}
	modules := 1 + n/400
	for i := 0; i < n; i++ {
		var pkg string
		if r := rng.Intn(4); r == 0 {
			pkg = std[rng.Intn(len(std))]
		} else {
			m := rng.Intn(modules)
			pkg = fmt.Sprintf("github.com/acme%d/svc%d/v%d/internal/pkg%d", m%97, m, 2+m%3, rng.Intn(12))
		}
		var name string
		switch i % 6 {
		case 0:
			name = fmt.Sprintf("%s.(*Type%d).Method%d", pkg, rng.Intn(300), i)
		case 1:
			name = fmt.Sprintf("%s.handler%d.func%d", pkg, i, 1+rng.Intn(4))
		case 2:
			name = fmt.Sprintf("%s.Generic%d[go.shape.int,go.shape.string]", pkg, i)
		case 3:
			name = fmt.Sprintf("%s.Type%d.Value%d", pkg, rng.Intn(300), i)
		default:
			name = fmt.Sprintf("%s.fn%d", pkg, i)
		}
		g.names = append(g.names, name)
		g.files = append(g.files, "/build/"+pkg+"/file"+fmt.Sprint(i%17)+".go")
		k := 2 + rng.Intn(7)
		cs := make([]int32, k)
		for j := range cs {
			cs[j] = int32(rng.Intn(n))
		}
		g.callees = append(g.callees, cs)
		in := int32(-1)
		if rng.Intn(3) == 0 {
			in = int32(rng.Intn(n)) // one call site in three has an inlined frame
		}
		g.inlined = append(g.inlined, in)
	}
	return g
}

// frame is a stack frame: a function and the call site (or leaf line)
// within it.
type frame struct{ fn, site int32 }

// walk draws a stack, root first, of a depth between sh's bounds.
func (g *Graph) walk(rng *rand.Rand, sh Shape, st []frame) []frame {
	st = st[:0]
	depth := sh.MinDepth + rng.Intn(sh.MaxDepth-sh.MinDepth+1)
	pick := skewed
	if sh.Uniform {
		pick = func(rng *rand.Rand, n int) int { return rng.Intn(n) }
	}
	f := int32(pick(rng, g.roots))
	for d := 0; d < depth; d++ {
		cs := g.callees[f]
		site := pick(rng, len(cs))
		if d == depth-1 {
			site = len(cs) + rng.Intn(4) // a leaf line of its own
		}
		st = append(st, frame{f, int32(site)})
		if site < len(cs) {
			f = cs[site]
		}
	}
	return st
}

// skewed is in [0, n), 0 the likeliest: the hot path.
func skewed(rng *rand.Rand, n int) int {
	u := rng.Float64()
	return int(u * u * u * float64(n))
}

// WriteProfile writes a gzipped pprof profile of sh.Samples stacks drawn
// with seed: types are "name/unit" sample types, each sample's values
// drawn from 1 to 10000.
func (g *Graph) WriteProfile(w io.Writer, seed int64, sh Shape, types []string) error {
	rng := rand.New(rand.NewSource(seed))
	e := &encoder{strs: map[string]uint64{"": 0}, locs: map[uint64]uint64{}, funcs: map[int32]uint64{}, g: g}
	e.table = append(e.table, "")
	var b []byte
	for _, t := range types {
		name, unit, _ := strings.Cut(t, "/")
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, e.valueType(name, unit))
	}
	var st []frame
	var locs, vals []byte
	for i := 0; i < sh.Samples; i++ {
		st = g.walk(rng, sh, st)
		locs = locs[:0]
		for d := len(st) - 1; d >= 0; d-- {
			locs = protowire.AppendVarint(locs, e.location(st[d], sh.FreshLeaves && d == len(st)-1))
		}
		vals = vals[:0]
		for range types {
			vals = protowire.AppendVarint(vals, uint64(1+rng.Int63n(10000)))
		}
		var s []byte
		s = protowire.AppendTag(s, 1, protowire.BytesType)
		s = protowire.AppendBytes(s, locs)
		s = protowire.AppendTag(s, 2, protowire.BytesType)
		s = protowire.AppendBytes(s, vals)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, s)
	}
	b = append(b, e.body...)
	ptName, ptUnit, _ := strings.Cut(types[0], "/")
	pt := e.valueType(ptName, ptUnit)
	for _, fl := range e.funcBody {
		b = append(b, fl...)
	}
	for _, s := range e.table {
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	b = protowire.AppendTag(b, 11, protowire.BytesType)
	b = protowire.AppendBytes(b, pt)
	b = protowire.AppendTag(b, 12, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	zw, _ := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if _, err := zw.Write(b); err != nil {
		return err
	}
	return zw.Close()
}

// encoder keeps a profile's tables while its samples are written.
type encoder struct {
	g        *Graph
	strs     map[string]uint64
	table    []string
	locs     map[uint64]uint64 // fn<<32|site -> location id
	nlocs    uint64
	funcs    map[int32]uint64
	body     []byte   // locations
	funcBody [][]byte // functions
}

func (e *encoder) str(s string) uint64 {
	if i, ok := e.strs[s]; ok {
		return i
	}
	i := uint64(len(e.table))
	e.strs[s] = i
	e.table = append(e.table, s)
	return i
}

// The table's strings for a value type's name and unit (they are written
// once the samples are: the string table comes last).
func (e *encoder) valueType(name, unit string) []byte {
	var v []byte
	v = protowire.AppendTag(v, 1, protowire.VarintType)
	v = protowire.AppendVarint(v, e.str(name))
	v = protowire.AppendTag(v, 2, protowire.VarintType)
	v = protowire.AppendVarint(v, e.str(unit))
	return v
}

func (e *encoder) function(fn int32) uint64 {
	if id, ok := e.funcs[fn]; ok {
		return id
	}
	id := uint64(len(e.funcs) + 1)
	e.funcs[fn] = id
	var v []byte
	name := e.str(e.g.names[fn])
	for _, f := range [][2]uint64{{1, id}, {2, name}, {3, name}, {4, e.str(e.g.files[fn])}} {
		v = protowire.AppendTag(v, protowire.Number(f[0]), protowire.VarintType)
		v = protowire.AppendVarint(v, f[1])
	}
	var m []byte
	m = protowire.AppendTag(m, 5, protowire.BytesType)
	e.funcBody = append(e.funcBody, protowire.AppendBytes(m, v))
	return id
}

// location is the id of a frame's location; fresh makes a new one (its
// own address) whatever the frame.
func (e *encoder) location(f frame, fresh bool) uint64 {
	key := uint64(f.fn)<<32 | uint64(f.site)
	if id, ok := e.locs[key]; ok && !fresh {
		return id
	}
	e.nlocs++
	id := e.nlocs
	if !fresh {
		e.locs[key] = id
	}
	var v []byte
	v = protowire.AppendTag(v, 1, protowire.VarintType)
	v = protowire.AppendVarint(v, id)
	v = protowire.AppendTag(v, 3, protowire.VarintType)
	v = protowire.AppendVarint(v, 0x400000+16*id)
	line := func(fn int32, ln int64) {
		var l []byte
		l = protowire.AppendTag(l, 1, protowire.VarintType)
		l = protowire.AppendVarint(l, e.function(fn))
		l = protowire.AppendTag(l, 2, protowire.VarintType)
		l = protowire.AppendVarint(l, uint64(ln))
		v = protowire.AppendTag(v, 4, protowire.BytesType)
		v = protowire.AppendBytes(v, l)
	}
	ln := int64(10 + 7*f.site)
	if fresh {
		ln = int64(10 + id%5000)
	}
	if in := e.g.inlined[f.fn]; in >= 0 && int(f.site) < len(e.g.callees[f.fn]) {
		line(in, ln+1) // the inlined callee first: pprof's order, innermost first
	}
	line(f.fn, ln)
	e.body = protowire.AppendTag(e.body, 4, protowire.BytesType)
	e.body = protowire.AppendBytes(e.body, v)
	return id
}

// WriteFolded writes lines of folded stacks ("a;b;c count", root first)
// drawn with seed, inlined frames included, sorted as the stackcollapse
// scripts write them; it returns the bytes written.
func (g *Graph) WriteFolded(w io.Writer, seed int64, sh Shape) (int64, error) {
	rng := rand.New(rand.NewSource(seed))
	var st []frame
	lines := make([]string, 0, sh.FoldedLines)
	counts := map[string]int{}
	var line []byte
	for i := 0; i < sh.FoldedLines; i++ {
		st = g.walk(rng, sh, st)
		line = line[:0]
		for d, f := range st {
			if d > 0 {
				line = append(line, ';')
			}
			line = append(line, g.names[f.fn]...)
			if in := g.inlined[f.fn]; in >= 0 && int(f.site) < len(g.callees[f.fn]) {
				line = append(line, ';')
				line = append(line, g.names[in]...)
			}
		}
		k := string(line)
		if _, ok := counts[k]; !ok {
			lines = append(lines, k)
		}
		counts[k] += 1 + rng.Intn(1000)
	}
	sort.Strings(lines)
	bw := bufio.NewWriterSize(w, 1<<20)
	var n int64
	for _, l := range lines {
		m, err := fmt.Fprintf(bw, "%s %d\n", l, counts[l])
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}
