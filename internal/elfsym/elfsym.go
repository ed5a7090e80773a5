// Package elfsym symbolizes the PCs of a running Go process from its
// executable's .gopclntab, for the eBPF counters (copyspy attach, syscalls).
package elfsym

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/agent/wire"
)

// Table maps a process's PCs to functions through .gopclntab, which
// stripped Go binaries keep.
type Table struct {
	f              *elf.File
	tab            *gosym.Table
	bias           uint64 // load address minus link address (PIE)
	textLo, textHi uint64 // the .text section, link addresses
}

// InText reports whether pc, a run-time address, is in the .text section.
func (s *Table) InText(pc uint64) bool {
	return pc-s.bias >= s.textLo && pc-s.bias < s.textHi
}

// Open reads the Go symbol table of the executable at path, which process
// pid runs (for the load address of a position-independent executable).
func Open(path string, pid int) (*Table, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pcln := f.Section(".gopclntab")
	text := f.Section(".text")
	if pcln == nil || text == nil {
		return nil, errors.New("no .gopclntab or .text section")
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, fmt.Errorf("reading .gopclntab: %w", err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, fmt.Errorf("parsing .gopclntab: %w", err)
	}
	s := &Table{tab: tab, textLo: text.Addr, textHi: text.Addr + text.Size}
	// Keep the program headers for file offsets; f is closed.
	s.f = &elf.File{FileHeader: f.FileHeader, Progs: f.Progs}
	if f.Type == elf.ET_DYN {
		if s.bias, err = loadBias(f, pid); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// loadBias finds where a position-independent executable was mapped.
func loadBias(f *elf.File, pid int) (uint64, error) {
	var first uint64 = ^uint64(0)
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr < first {
			first = p.Vaddr &^ 0xfff
		}
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	mf, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, err
	}
	defer mf.Close()
	sc := bufio.NewScanner(mf)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || filepath.Clean(fl[5]) != exe || fl[2] != "00000000" {
			continue
		}
		start, err := strconv.ParseUint(strings.SplitN(fl[0], "-", 2)[0], 16, 64)
		if err != nil {
			return 0, err
		}
		return start - first, nil
	}
	return 0, fmt.Errorf("no mapping of %s in /proc/%d/maps", exe, pid)
}

// FileOffset is the offset in the executable of fn's entry, which is what
// UprobeOptions.Address wants (a virtual address attaches but never fires).
func (s *Table) FileOffset(fn string) (uint64, error) {
	f := s.tab.LookupFunc(fn)
	if f == nil {
		return 0, fmt.Errorf("no function %s in .gopclntab", fn)
	}
	for _, p := range s.f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && f.Entry >= p.Vaddr && f.Entry < p.Vaddr+p.Filesz {
			return f.Entry - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("%s at %#x is in no executable segment", fn, f.Entry)
}

// Frames symbolizes return PCs. debug/gosym names the outermost function
// of a PC and the file and line of the innermost: inlined frames are not
// expanded in attach mode.
func (s *Table) Frames(pcs []uint64) []wire.PCFrames {
	out := make([]wire.PCFrames, 0, len(pcs))
	for _, pc := range pcs {
		pf := wire.PCFrames{PC: pc}
		// A return PC points after the call; pc-1 is inside it.
		file, line, fn := s.tab.PCToLine(pc - s.bias - 1)
		if fn != nil {
			pf.Frames = []wire.Frame{{Func: fn.Name, File: file, Line: line}}
		}
		out = append(out, pf)
	}
	return out
}
