package review

// What a benchmark pays once, beside its figures per op: a dependency
// bump can move a cost from package init to the first call (a type
// cache built lazily) and leave every op's cost alone. Not per op, and
// not gated: go test -benchmem spreads what falls in its timed region
// over b.N, so it is shown, with its sites, whenever it moved.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/schema"
)

// onceRow is one paid-once amount of a benchmark in both revisions.
type onceRow struct {
	what          string
	allocs, bytes [2]int64
}

// moved says whether the amount moved enough to be shown: a kilobyte and
// a tenth of the base, or ten allocations and a tenth.
func (x onceRow) moved() bool {
	db, da := math.Abs(float64(x.bytes[1]-x.bytes[0])), math.Abs(float64(x.allocs[1]-x.allocs[0]))
	return db >= 1024 && db >= 0.1*float64(x.bytes[0]) || da >= 10 && da >= 0.1*float64(x.allocs[0])
}

// onceSection is review.md's table of what each benchmark paid once,
// for those whose amounts moved between the revisions.
func (r *Result) onceSection() string {
	var b strings.Builder
	for _, it := range r.Items {
		for _, name := range sortedKeys(it.Once) {
			o := it.Once[name]
			if o.Before == nil || o.After == nil {
				continue
			}
			bf, af := o.Before, o.After
			rows := []onceRow{
				{"its process before its first run (package init, TestMain)", [2]int64{bf.StartupAllocs, af.StartupAllocs}, [2]int64{bf.StartupBytes, af.StartupBytes}},
				{"its first op, beyond a steady one (testing's 1-op run, uncounted)", [2]int64{bf.FirstAllocs, af.FirstAllocs}, [2]int64{bf.FirstBytes, af.FirstBytes}},
				{"the reported run, beyond N steady ops", [2]int64{bf.RunAllocs, af.RunAllocs}, [2]int64{bf.RunBytes, af.RunBytes}},
			}
			if !slices.ContainsFunc(rows, onceRow.moved) {
				continue
			}
			if b.Len() == 0 {
				b.WriteString("**Paid once** (not per op, not gated; go test -benchmem spreads what its timed region holds over b.N): what each benchmark's process and first runs paid besides their ops, where it moved.\n\n| benchmark | paid by | before | after | change |\n|---|---|---:|---:|---:|\n")
			}
			for _, x := range rows {
				fmt.Fprintf(&b, "| %s | %s | %d B (%d allocs) | %d B (%d allocs) | %s B (%s allocs) |\n", safetext.Markdown(name), x.what,
					x.bytes[0], x.allocs[0], x.bytes[1], x.allocs[1], signedNum(float64(x.bytes[1]-x.bytes[0])), signedNum(float64(x.allocs[1]-x.allocs[0])))
			}
			if sites := onceSiteMoves(bf.Sites, af.Sites); sites != "" {
				fmt.Fprintf(&b, "| %s | sites that moved (first op and reported run) | | | %s |\n", safetext.Markdown(name), sites)
			}
		}
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// onceSiteMoves names the three sites whose paid-once bytes moved most
// between the base's and the head's lists ("(other sites)" left out).
func onceSiteMoves(before, after []schema.OnceSite) string {
	moved := map[string]int64{}
	for _, s := range after {
		moved[s.Func] += s.Bytes
	}
	for _, s := range before {
		moved[s.Func] -= s.Bytes
	}
	delete(moved, "(other sites)")
	keys := slices.SortedFunc(func(yield func(string) bool) {
		for k, v := range moved {
			if v != 0 && !yield(k) {
				return
			}
		}
	}, func(a, b string) int {
		return cmp.Or(cmp.Compare(absInt(moved[b]), absInt(moved[a])), strings.Compare(a, b))
	})
	var out []string
	for _, k := range keys[:min(3, len(keys))] {
		out = append(out, fmt.Sprintf("%s %s B", safetext.Code(k), signedNum(float64(moved[k]))))
	}
	return strings.Join(out, ", ")
}

func absInt(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
