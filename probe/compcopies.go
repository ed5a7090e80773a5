package probe

// The copies the compiler emits itself (vector moves, REP; MOVSQ) never
// reach memmove, so copyspy does not see them: a 176-byte struct copied
// by value per op adds nothing to copied-B/op. Where a benchmark's
// instructions are counted, each instruction's executions are known, and
// compcopies reads which of them copy and how many bytes: their bytes per
// op are compiler-copied-B/op, by site, on the instructions' stacks.

import (
	"fmt"
	"math"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/copyspy/compcopies"
)

// compilerCopies is the compiler's own copies in an instructions profile
// (its samples' leaves are single instructions, by address): a profile of
// copied bytes on the same stacks, and their total. binary is the
// profile's binary.
func compilerCopies(ins *profile.Profile, binary string) (*profile.Profile, int64, error) {
	ran := map[uint64]int64{} // executions by address
	left := map[uint64]int{}  // samples by address, until the last
	var addrs []uint64
	for _, s := range ins.Sample {
		if len(s.Location) == 0 || s.Location[0].Address == 0 {
			continue
		}
		a := s.Location[0].Address
		if !compiledGo(s.Location[0]) {
			continue // assembly: memmove's own stores are copyspy's
		}
		if _, ok := ran[a]; !ok {
			addrs = append(addrs, a)
		}
		ran[a] += s.Value[0]
		left[a]++
	}
	moves, err := compcopies.Find(binary, addrs)
	if err != nil {
		return nil, 0, err
	}
	out := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "copied_bytes", Unit: "bytes"}},
		PeriodType: &profile.ValueType{Type: "copied_bytes", Unit: "bytes"},
		Period:     1,
		Location:   ins.Location,
		Function:   ins.Function,
		Comments:   []string{"perfspy.source=compiler copies: vector stores (16 or 32 B each run) and REP; MOVS (its count each run) in the compiled code, by their executions under callgrind"},
	}
	// Each address's bytes, parted among its samples as its executions
	// are: the parts add up to the address's bytes.
	given := map[uint64]int64{}
	var total int64
	for _, s := range ins.Sample {
		if len(s.Location) == 0 {
			continue
		}
		a := s.Location[0].Address
		m, ok := moves[a]
		if !ok || ran[a] == 0 {
			continue
		}
		all := m.Bytes(ran[a], ran[m.CountAt])
		b := int64(math.Round(float64(all) * float64(s.Value[0]) / float64(ran[a])))
		if left[a]--; left[a] == 0 {
			b = all - given[a] // the last sample takes what rounding left
		}
		given[a] += b
		if b == 0 {
			continue
		}
		total += b
		out.Sample = append(out.Sample, &profile.Sample{Location: s.Location, Value: []int64{b}})
	}
	if err := out.CheckValid(); err != nil {
		return nil, 0, fmt.Errorf("compiler copies: %w", err)
	}
	return out, total, nil
}

// compiledGo says whether a location's instruction is the compiler's: its
// innermost line is in a .go file. Assembly (runtime.memmove's vector
// loop, memmove_amd64.s) copies for a call copyspy counts already.
func compiledGo(l *profile.Location) bool {
	return len(l.Line) > 0 && l.Line[0].Function != nil && strings.HasSuffix(l.Line[0].Function.Filename, ".go")
}
