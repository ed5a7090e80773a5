package diff

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/internal/profwire"
	"github.com/perfspy/perfspy/profkey"
)

// fileSums is one file's values by key, on keys of its own: files are
// summed on all cores, then their keys are merged in file order, before
// side first, which numbers them as one pass over the files would.
type fileSums struct {
	keys      *interner
	flat, cum []int64
	total     int64
	stacks    keyStacks
}

// keyStacks are a file's stacks as key sequences (leaf first), for
// DiffProfile: a negative key, -(k+1), is a sample with no stack.
type keyStacks struct {
	keys []int32
	off  []int32
	vals []int64
}

// aggregate sums both sides' samples by key, file by file.
func aggregate(before, after *Side, sample string, f profkey.Folds, keys *interner, keepStacks bool) (*agg, *agg) {
	bp := before.profiles()
	all := append(append([]*profwire.Profile{}, bp...), after.profiles()...)
	sums := make([]*fileSums, len(all))
	parallel(len(all), func(i int) {
		sums[i] = sumFile(all[i], sampleIndex(all[i], sample), f, keepStacks)
	})
	return merge(sums[:len(bp)], keys), merge(sums[len(bp):], keys)
}

// merge puts files' sums on the shared keys.
func merge(files []*fileSums, keys *interner) *agg {
	a := &agg{stacks: map[string]int64{}}
	var sb strings.Builder
	for _, fs := range files {
		remap := make([]int, len(fs.keys.names))
		for k, name := range fs.keys.names {
			remap[k] = keys.id(name)
		}
		flat, cum := make([]int64, len(keys.names)), make([]int64, len(keys.names))
		for k := range fs.flat {
			flat[remap[k]] += fs.flat[k]
			cum[remap[k]] += fs.cum[k]
		}
		a.flat, a.cum, a.total = append(a.flat, flat), append(a.cum, cum), append(a.total, fs.total)
		st := &fs.stacks
		for i, v := range st.vals {
			sb.Reset()
			for _, k := range st.keys[st.off[i]:st.off[i+1]] {
				if k < 0 {
					sb.WriteString(strconv.Itoa(remap[-k-1]))
					continue
				}
				sb.WriteString(strconv.Itoa(remap[k]))
				sb.WriteByte(';')
			}
			a.stacks[sb.String()] += v
		}
	}
	return a
}

// fileKeys gives one profile's locations their keys, computed once per
// location and function.
type fileKeys struct {
	p        *profwire.Profile
	f        profkey.Folds
	keys     *interner
	locOff   []int32 // location -> its keys in locKeys, + 1
	locLen   []int32
	locKeys  []int32
	funcKeys []string
	funcDone []bool
	funcID   []int32 // function -> its key + 1, when keys have no line
	// per key: flat and cum values, and the stack that last counted
	// its cum
	flat, cum []int64
	seen      []int
}

// sumFile adds up p's stacks' values of type si by key: flat at the
// leaf, cum once per stack; with keepStacks, the stacks too.
func sumFile(p *profwire.Profile, si int, f profkey.Folds, keepStacks bool) *fileSums {
	fk := &fileKeys{p: p, f: f, keys: &interner{ids: map[string]int{}},
		locOff: make([]int32, p.NumLocations()), locLen: make([]int32, p.NumLocations()),
		funcKeys: make([]string, p.NumFuncs()), funcDone: make([]bool, p.NumFuncs()), funcID: make([]int32, p.NumFuncs())}
	fs := &fileSums{keys: fk.keys}
	if keepStacks {
		fs.stacks.off = []int32{0}
	}
	var locs []int32
	for s := 0; s < p.NumStacks(); s++ {
		v := p.Value(s, si)
		fs.total += v
		leaf := -1
		locs = p.Stack(s, locs[:0])
		for _, l := range locs {
			for _, k := range fk.location(l) {
				if leaf < 0 {
					leaf = int(k)
				}
				fk.addCum(int(k), s, v)
				if keepStacks {
					fs.stacks.keys = append(fs.stacks.keys, k)
				}
			}
		}
		if leaf < 0 {
			leaf = fk.keys.id("(no stack)")
			fk.grow()
			fk.addCum(leaf, s, v)
			if keepStacks {
				fs.stacks.keys = append(fs.stacks.keys, int32(-leaf-1))
			}
		}
		fk.flat[leaf] += v
		if keepStacks {
			fs.stacks.off = append(fs.stacks.off, int32(len(fs.stacks.keys)))
			fs.stacks.vals = append(fs.stacks.vals, v)
		}
	}
	fk.grow()
	fs.flat, fs.cum = fk.flat, fk.cum
	return fs
}

// location returns the keys of location l, innermost first.
func (fk *fileKeys) location(l int32) []int32 {
	if o := fk.locOff[l]; o != 0 {
		return fk.locKeys[o-1 : o-1+fk.locLen[l]]
	}
	start := len(fk.locKeys)
	fns, first := fk.p.Lines(l), 0
	if fk.f.Inline && len(fns) > 1 {
		first = len(fns) - 1
		fns = fns[first:]
	}
	if len(fns) == 0 {
		fk.locKeys = append(fk.locKeys, int32(fk.keys.id(fmt.Sprintf("0x%x", fk.p.Address(l)))))
	}
	for i, fn := range fns {
		if fk.f.Lines {
			fk.locKeys = append(fk.locKeys, int32(fk.keys.id(fk.keyOf(fn, fk.p.Line(l, first+i)))))
			continue
		}
		if fk.funcID[fn] == 0 {
			fk.funcID[fn] = int32(fk.keys.id(fk.keyOf(fn, 0))) + 1
		}
		fk.locKeys = append(fk.locKeys, fk.funcID[fn]-1)
	}
	fk.locOff[l], fk.locLen[l] = int32(start+1), int32(len(fk.locKeys)-start)
	fk.grow()
	return fk.locKeys[start:]
}

func (fk *fileKeys) keyOf(fn int32, line int64) string {
	if !fk.funcDone[fn] {
		fk.funcKeys[fn] = profkey.FuncKey(fk.p.FuncName(fn), fk.f)
		fk.funcDone[fn] = true
	}
	if fk.f.Lines {
		return fk.funcKeys[fn] + ":" + strconv.FormatInt(line, 10)
	}
	return fk.funcKeys[fn]
}

// grow makes room for every key interned so far.
func (fk *fileKeys) grow() {
	for len(fk.flat) < len(fk.keys.names) {
		fk.flat, fk.cum, fk.seen = append(fk.flat, 0), append(fk.cum, 0), append(fk.seen, -1)
	}
}

// addCum adds v to key k's cum once per stack s.
func (fk *fileKeys) addCum(k, s int, v int64) {
	if fk.seen[k] != s {
		fk.seen[k] = s
		fk.cum[k] += v
	}
}
