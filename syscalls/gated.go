package syscalls

import (
	"debug/elf"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"

	"github.com/perfspy/perfspy/internal/bpfasm"
	"github.com/perfspy/perfspy/internal/capability"
)

// gatedKey is one syscall from one stack in one region: the map key of a
// gated counter.
type gatedKey struct {
	Region  uint32
	ID      uint32
	StackID int32
	_       uint32
	SPWord  uint64
}

// OpenGated counts the syscalls of process pid that it makes while the
// 32-bit variable at gateAddr in its memory is not 0 (a region the process
// opens and closes itself, such as a benchmark's timed region), by the
// variable's value, by number and by stack. The variable is read at each
// system call of the process; a process whose page of it is not mapped
// yet counts nothing.
func OpenGated(pid int, gateAddr uint64) (*Counter, error) {
	if err := capability.BPF("counting syscalls"); err != nil {
		return nil, err
	}
	_ = rlimit.RemoveMemlock()
	c := &Counter{pid: pid, gated: true}
	var err error
	if c.stacks, err = ebpf.NewMap(bpfasm.StackMap("sys_g_stacks", 1<<14)); err != nil {
		return nil, fmt.Errorf("creating the stack map: %w", err)
	}
	if c.stackCnts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "sys_g_cnts", Type: ebpf.Hash, KeySize: 24, ValueSize: 8, MaxEntries: 1 << 16}); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating the counts map: %w", err)
	}
	if err := c.attach("sys_enter_gated", gatedProgram(uint32(pid), gateAddr, c.stacks.FD(), c.stackCnts.FD())); err != nil {
		return nil, err
	}
	return c, nil
}

// gatedProgram counts a sys_enter of process tgid under the u32 at gate
// in the process's memory, when it is not 0, by number and user stack.
func gatedProgram(tgid uint32, gate uint64, stacks, cnts int) asm.Instructions {
	const (
		keyOff  = -32 // gatedKey: region -32, id -28, stackid -24, pad -20, spword -16
		gateOff = -36 // the gate's value
		spOff   = -48 // the user sp
		oneOff  = -56 // the value 1, for a first insert
	)
	return slices.Concat(
		bpfasm.OwnProcess(tgid, "exit"),
		asm.Instructions{
			asm.Mov.Imm(asm.R1, 0),
			asm.StoreMem(asm.R10, gateOff, asm.R1, asm.Word),
			asm.Mov.Reg(asm.R1, asm.R10),
			asm.Add.Imm(asm.R1, gateOff),
			asm.Mov.Imm(asm.R2, 4),
			asm.LoadImm(asm.R3, int64(gate), asm.DWord),
			asm.FnProbeReadUser.Call(),
			asm.JNE.Imm(asm.R0, 0, "exit"),
			asm.LoadMem(asm.R1, asm.R10, gateOff, asm.Word),
			asm.JEq.Imm(asm.R1, 0, "exit"),
			asm.StoreMem(asm.R10, keyOff, asm.R1, asm.Word),

			asm.LoadMem(asm.R7, asm.R6, 8, asm.DWord), // id
			asm.JLE.Imm(asm.R7, MaxSyscall, "inrange"),
			asm.Mov.Imm(asm.R7, MaxSyscall),
			asm.StoreMem(asm.R10, keyOff+4, asm.R7, asm.Word).WithSymbol("inrange"),

			asm.Mov.Imm(asm.R1, 0),
			asm.StoreMem(asm.R10, keyOff+12, asm.R1, asm.Word), // the padding
		},
		userStack(stacks, keyOff+8, keyOff+16, spOff),
		addOne(cnts, keyOff, oneOff),
	)
}

// Regions returns what a gated counter counted, by the gate's value.
func (c *Counter) Regions() (map[uint32]map[StackKey]uint64, error) {
	if !c.gated {
		return nil, fmt.Errorf("syscalls: Regions on a counter that is not gated")
	}
	out := map[uint32]map[StackKey]uint64{}
	var k gatedKey
	var v uint64
	it := c.stackCnts.Iterate()
	for it.Next(&k, &v) {
		m := out[k.Region]
		if m == nil {
			m = map[StackKey]uint64{}
			out[k.Region] = m
		}
		m[StackKey{ID: k.ID, StackID: k.StackID, SPWord: k.SPWord}] += v
	}
	return out, it.Err()
}

// GateAddr finds the address of the gate variable sym in the executable
// at path. The program reads it at that address, so the executable must
// not be position independent.
func GateAddr(path, sym string) (uint64, error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		return 0, fmt.Errorf("%s is position independent (%s): the syscall counter reads %s at a fixed address", path, f.Type, sym)
	}
	syms, err := f.Symbols()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range syms {
		if s.Name == sym {
			return s.Value, nil
		}
	}
	return 0, fmt.Errorf("%s has no symbol %s", path, sym)
}
