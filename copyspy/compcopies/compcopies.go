// Package compcopies finds the copies the compiler emits itself, which
// never reach runtime.memmove and so are not in copyspy's counts: on
// amd64, a struct or array assigned by value is copied by 16-byte vector
// moves (MOVUPS through an X register) up to a few hundred bytes, and by
// REP; MOVSQ past that. Given the instructions a run executed at each
// address (callgrind's counts, per instruction), the bytes each such
// store moved are exact: a vector store moves its width each time it
// runs; a REP; MOVSQ runs once per quadword (valgrind counts each
// iteration) and the compiler sets its count just before it (MOVL $n,
// CX), so it moves 8n bytes each time that instruction runs.
//
// Stores from X15 are left out: in Go's ABI X15 is always zero, and those
// stores clear memory (memclr's inline form), they copy nothing.
package compcopies

import (
	"debug/elf"
	"fmt"
	"slices"

	"golang.org/x/arch/x86/x86asm"
)

// Move is one instruction that copies: its width, in bytes per run,
// or per iteration for a REP; MOVS. Count is the iterations each run
// makes when the compiler set them just before it (CountAt's
// instruction), 0 when not known.
type Move struct {
	Width int
	Rep   bool
	Count int
	// CountAt is the address of the instruction that set the count: it
	// runs once per run of the REP.
	CountAt uint64
	Text    string // the instruction, as x86asm writes it (Go syntax)
}

// Bytes are the bytes a move copied, given how many times the
// instructions at its address and at its CountAt ran (callgrind's Ir). A
// REP whose count is not known (or whose count's instruction was not
// counted) gives its width per execution: valgrind counts each iteration,
// and one more each time it ends, so that is a bound from above.
func (m Move) Bytes(ran, countRan int64) int64 {
	if m.Rep && m.Count > 0 && countRan > 0 {
		return int64(m.Width*m.Count) * countRan
	}
	return int64(m.Width) * ran
}

// Find decodes the instructions of binary (an amd64 ELF executable) at
// addrs and returns those that copy. Addresses outside the text, or
// whose instruction does not decode, are left out.
func Find(binary string, addrs []uint64) (map[uint64]Move, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, fmt.Errorf("compiler copies: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("compiler copies: %s is %s; only amd64's copies are read", binary, f.Machine)
	}
	text := f.Section(".text")
	if text == nil {
		return nil, fmt.Errorf("compiler copies: %s has no .text", binary)
	}
	code, err := text.Data()
	if err != nil {
		return nil, fmt.Errorf("compiler copies: %s: %w", binary, err)
	}
	at := func(a uint64) (x86asm.Inst, bool) {
		if a < text.Addr || a >= text.Addr+uint64(len(code)) {
			return x86asm.Inst{}, false
		}
		in, err := x86asm.Decode(code[a-text.Addr:], 64)
		return in, err == nil
	}
	out := map[uint64]Move{}
	for _, a := range addrs {
		in, ok := at(a)
		if !ok {
			continue
		}
		m, ok := move(in)
		if !ok {
			continue
		}
		m.Text = x86asm.GoSyntax(in, a, nil)
		if m.Rep {
			m.Count, m.CountAt = repCount(code, text.Addr, a)
		}
		out[a] = m
	}
	return out, nil
}

// move says whether an instruction copies, and its width.
func move(in x86asm.Inst) (Move, bool) {
	switch in.Op {
	case x86asm.MOVSQ, x86asm.MOVSD, x86asm.MOVSW, x86asm.MOVSB:
		if !slices.Contains(in.Prefix[:], x86asm.PrefixREP) {
			return Move{}, false
		}
		w := map[x86asm.Op]int{x86asm.MOVSQ: 8, x86asm.MOVSD: 4, x86asm.MOVSW: 2, x86asm.MOVSB: 1}[in.Op]
		return Move{Width: w, Rep: true}, true
	case x86asm.MOVUPS, x86asm.MOVDQU, x86asm.MOVAPS, x86asm.MOVDQA, x86asm.VMOVDQU, x86asm.VMOVUPS:
		// A store: memory first (Intel order), a vector register second.
		if _, ok := in.Args[0].(x86asm.Mem); !ok {
			return Move{}, false
		}
		r, ok := in.Args[1].(x86asm.Reg)
		if !ok || r == x86asm.X15 {
			return Move{}, false
		}
		switch {
		case r >= x86asm.X0 && r <= x86asm.X15:
			return Move{Width: 16}, true
		case r >= x86asm.Y0 && r <= x86asm.Y15:
			return Move{Width: 32}, true
		}
	}
	return Move{}, false
}

// repCount reads the count the compiler set for the REP at a: the
// instruction just before it, when that moves a constant into CX (or
// ECX). It decodes the few instructions before a from their possible
// starts, keeping one that ends exactly at a.
func repCount(code []byte, base, a uint64) (int, uint64) {
	for back := uint64(2); back <= 10 && back <= a-base; back++ {
		start := a - back
		in, err := x86asm.Decode(code[start-base:], 64)
		if err != nil || uint64(in.Len) != back || in.Op != x86asm.MOV {
			continue
		}
		r, ok := in.Args[0].(x86asm.Reg)
		imm, isImm := in.Args[1].(x86asm.Imm)
		if ok && isImm && (r == x86asm.RCX || r == x86asm.ECX) && imm > 0 {
			return int(imm), start
		}
	}
	return 0, 0
}
