// Package bpfasm holds the pieces of eBPF assembly that perfspy's programs
// (copyspy's uprobes, the syscall counter's raw tracepoint) share: the
// filter on the measured process, map lookups and first inserts keyed by a
// slot of the program's stack, and the user stack-trace map.
package bpfasm

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

const (
	// UserStack is BPF_F_USER_STACK, for bpf_get_stackid.
	UserStack = 1 << 8
	// NoExist is BPF_NOEXIST, for bpf_map_update_elem.
	NoExist = 1
	// StackDepth is PERF_MAX_STACK_DEPTH, the frames a stack map keeps.
	StackDepth = 127
	// PtRegsSP is the offset of sp in struct pt_regs, x86_64.
	PtRegsSP = 152
	// PtRegsLRARM64 is the offset of regs[30], the link register, in
	// arm64's struct pt_regs (user_pt_regs: regs[31], sp, pc, pstate):
	// where a frameless function's caller left its return PC on arm64.
	PtRegsLRARM64 = 30 * 8
)

// StackMap is the spec of a map of user stack traces.
func StackMap(name string, entries uint32) *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: name, Type: ebpf.StackTrace, KeySize: 4, ValueSize: StackDepth * 8, MaxEntries: entries}
}

// OwnProcess keeps the program's context in R6 and jumps to the label exit
// unless the current thread belongs to process tgid.
func OwnProcess(tgid uint32, exit string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetCurrentPidTgid.Call(),
		asm.RSh.Imm(asm.R0, 32),
		asm.JNE.Imm(asm.R0, int32(tgid), exit),
	}
}

// Lookup sets R0 to the value of map m under the key at fp+keyOff (0 when
// there is none).
func Lookup(m int, keyOff int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, m),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, int32(keyOff)),
		asm.FnMapLookupElem.Call(),
	}
}

// InsertNew inserts into map m the value at fp+valOff under the key at
// fp+keyOff, unless the key is there already (R0 is then non-zero).
func InsertNew(m int, keyOff, valOff int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, m),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, int32(keyOff)),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, int32(valOff)),
		asm.Mov.Imm(asm.R4, NoExist),
		asm.FnMapUpdateElem.Call(),
	}
}
