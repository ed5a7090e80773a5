// Package stacks turns the symbolized stacks that perfspy's counters report
// into pprof locations, and names the site a reviewer cares about: the
// first frame outside the runtime.
package stacks

import (
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/wire"
)

// Builder adds locations and functions to a profile, deduplicated by PC and
// by (name, file).
type Builder struct {
	P     *profile.Profile
	funcs map[[2]string]*profile.Function
	locs  map[locKey]*profile.Location
}

// locKey tells a PC's full location from one whose runtime lines were
// trimmed off by UserStack.
type locKey struct {
	pc    uint64
	lines int
}

// NewBuilder returns a Builder for p.
func NewBuilder(p *profile.Profile) *Builder {
	return &Builder{P: p, funcs: map[[2]string]*profile.Function{}, locs: map[locKey]*profile.Location{}}
}

// Locations returns the locations of a stack, innermost first, as
// Logical leaves it. A PC's inlined frames become the lines of one
// location, innermost first, as pprof wants them.
func (b *Builder) Locations(stack []wire.PCFrames) []*profile.Location {
	stack = Logical(stack)
	out := make([]*profile.Location, 0, len(stack))
	for _, pf := range stack {
		k := locKey{pf.PC, len(pf.Frames)}
		loc := b.locs[k]
		if loc == nil {
			loc = &profile.Location{ID: uint64(len(b.P.Location) + 1), Address: pf.PC}
			for _, f := range pf.Frames {
				k := [2]string{f.Func, f.File}
				fn := b.funcs[k]
				if fn == nil {
					fn = &profile.Function{ID: uint64(len(b.P.Function) + 1), Name: f.Func, SystemName: f.Func, Filename: f.File}
					b.funcs[k] = fn
					b.P.Function = append(b.P.Function, fn)
				}
				loc.Line = append(loc.Line, profile.Line{Function: fn, Line: int64(f.Line)})
			}
			b.locs[k] = loc
			b.P.Location = append(b.P.Location, loc)
		}
		out = append(out, loc)
	}
	return out
}

// The shaping rules live in package wire, which the agent shares.
var (
	Logical   = wire.Logical
	IsRuntime = wire.IsRuntime
	Sites     = wire.Sites
	UserStack = wire.UserStack
)

// RuntimeEntry is the outermost runtime frame below the stack's first
// frame outside the runtime: the runtime function the code called ("" when
// the code called the allocating or copying function directly).
func RuntimeEntry(stack []wire.PCFrames) string {
	entry := ""
	for _, pf := range wire.Logical(stack) {
		for _, f := range pf.Frames {
			if !wire.IsRuntime(f.Func) {
				return entry
			}
			entry = f.Func
		}
	}
	return ""
}

// Key orders stacks deterministically.
func Key(stack []wire.PCFrames) string {
	var b strings.Builder
	for _, pf := range stack {
		b.WriteString(hex(pf.PC))
		b.WriteByte(';')
	}
	return b.String()
}

func hex(v uint64) string {
	const digits = "0123456789abcdef"
	var buf [16]byte
	for i := 15; i >= 0; i-- {
		buf[i] = digits[v&0xf]
		v >>= 4
	}
	return string(buf[:])
}
