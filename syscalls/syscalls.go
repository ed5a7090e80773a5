// Package syscalls counts the system calls of one process, exactly, by
// number and, when asked, by Go call site, with an eBPF program on the
// raw_syscalls:sys_enter tracepoint (attached as a raw tracepoint, which
// hands the program the user registers and needs no tracefs).
//
// Counting by number costs about 7% CPU on a small HTTP server; stacks cost
// more (about a third), so probe takes them only in the attribution window.
package syscalls

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/bpfasm"
	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/elfsym"
)

// Source names the figures this package gives, as summary.json says it.
const Source = "bpf-tracepoint"

// MaxSyscall bounds the syscall numbers counted one by one; larger ones
// (none on x86_64 today) count as MaxSyscall.
const MaxSyscall = 1023

// Name returns the name of syscall number n on this machine's
// architecture (the kernel's numbering: x86_64's own table, arm64's the
// generic one).
func Name(n int) string { return NameOn(runtime.GOARCH, n) }

// NameOn returns the name of syscall number n on GOARCH arch;
// syscall_N when the table has none.
func NameOn(arch string, n int) string {
	if s, ok := names[arch][n]; ok {
		return s
	}
	return fmt.Sprintf("syscall_%d", n)
}

// names are the syscall tables by GOARCH (gen_names.go).
var names = map[string]map[int]string{"amd64": namesAMD64, "arm64": namesARM64}

// StackKey is one syscall from one stack.
type StackKey struct {
	ID      uint32
	StackID int32  // bpf_get_stackid of the user stack, or < 0
	SPWord  uint64 // the word at the user stack pointer: the caller of a frameless function
}

// Counter counts one process's syscalls.
type Counter struct {
	pid       int
	counts    *ebpf.Map // per-CPU array: syscall number -> count
	ctl       *ebpf.Map // array[0] = 1 while stacks are taken
	stacks    *ebpf.Map // stack traces
	stackCnts *ebpf.Map // StackKey -> count
	prog      *ebpf.Program
	link      link.Link
	gated     bool // OpenGated: stackCnts is keyed by region, no counts map
}

// Open loads the program and attaches it to sys_enter, counting the
// syscalls of process pid (all its threads).
func Open(pid int) (*Counter, error) {
	if err := capability.BPF("counting syscalls"); err != nil {
		return nil, err
	}
	_ = rlimit.RemoveMemlock()
	c := &Counter{pid: pid}
	var err error
	if c.counts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "sys_counts", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: MaxSyscall + 1}); err != nil {
		return nil, fmt.Errorf("creating the counts map: %w", err)
	}
	if c.ctl, err = ebpf.NewMap(&ebpf.MapSpec{Name: "sys_ctl", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating the control map: %w", err)
	}
	if c.stacks, err = ebpf.NewMap(bpfasm.StackMap("sys_stacks", 1<<14)); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating the stack map: %w", err)
	}
	if c.stackCnts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "sys_stack_cnts", Type: ebpf.Hash, KeySize: 16, ValueSize: 8, MaxEntries: 1 << 16}); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating the stack counts map: %w", err)
	}
	if err := c.attach("sys_enter_count", program(uint32(pid), c.counts.FD(), c.ctl.FD(), c.stacks.FD(), c.stackCnts.FD())); err != nil {
		return nil, err
	}
	return c, nil
}

// attach loads the program insns and attaches it to sys_enter; on an
// error it closes the counter.
func (c *Counter) attach(name string, insns asm.Instructions) error {
	var err error
	c.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.RawTracepoint, License: "GPL", Instructions: insns})
	if err != nil {
		c.Close()
		return fmt.Errorf("loading the %s program: %w", name, err)
	}
	if c.link, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: c.prog}); err != nil {
		c.Close()
		return fmt.Errorf("attaching to raw_syscalls:sys_enter: %w", err)
	}
	return nil
}

// program counts a sys_enter of process tgid by number and, when ctl[0] is
// set, by user stack. The raw tracepoint's arguments are (struct pt_regs
// *regs, long id); regs are the user registers, so regs->sp is the user
// stack pointer, where a frameless function's caller left its return PC.
func program(tgid uint32, counts, ctl, stacks, stackCnts int) asm.Instructions {
	const (
		idOff  = -4  // u32 syscall number, the counts key
		keyOff = -24 // StackKey: id -24, stackid -20, spword -16
		spOff  = -32 // the user sp
		oneOff = -40 // the value 1, for a first insert
		zeroOf = -44 // u32 0, the ctl key
	)
	return slices.Concat(
		bpfasm.OwnProcess(tgid, "exit"),
		asm.Instructions{
			asm.LoadMem(asm.R7, asm.R6, 8, asm.DWord), // id
			asm.JLE.Imm(asm.R7, MaxSyscall, "inrange"),
			asm.Mov.Imm(asm.R7, MaxSyscall),
			asm.StoreMem(asm.R10, idOff, asm.R7, asm.Word).WithSymbol("inrange"),
		},
		bpfasm.Lookup(counts, idOff),
		asm.Instructions{
			asm.JEq.Imm(asm.R0, 0, "exit"),
			// An atomic add, though the value is this CPU's: the
			// syscall tracepoints may fault on recent kernels, so the
			// program runs with preemption on, and a task that
			// preempts it between a load and a store on the same CPU
			// would have its increment overwritten (25 of 7,972 writes
			// lost on a loaded machine).
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),

			// Stacks only while ctl[0] != 0.
			asm.Mov.Imm(asm.R1, 0),
			asm.StoreMem(asm.R10, zeroOf, asm.R1, asm.Word),
		},
		bpfasm.Lookup(ctl, zeroOf),
		asm.Instructions{
			asm.JEq.Imm(asm.R0, 0, "exit"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.JEq.Imm(asm.R1, 0, "exit"),

			asm.StoreMem(asm.R10, keyOff, asm.R7, asm.Word),
		},
		userStack(stacks, keyOff+4, keyOff+8, spOff),
		addOne(stackCnts, keyOff, oneOff),
	)
}

// userStack stores the bpf_get_stackid of the user stack at fp+idOff and
// the word at the user stack pointer at fp+spwordOff (fp+spOff is
// scratch); R6 holds the raw tracepoint's context. On arm64, whose
// frameless functions keep the caller's return PC in the link register,
// the word is the user's LR instead.
func userStack(stacks int, idOff, spwordOff, spOff int16) asm.Instructions {
	if runtime.GOARCH == "arm64" {
		return append(stackID(stacks, idOff), linkRegister(spwordOff)...)
	}
	return append(stackID(stacks, idOff), asm.Instructions{
		// spword = *(u64 *)regs->sp
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R10, spOff, asm.R1, asm.DWord),
		asm.StoreMem(asm.R10, spwordOff, asm.R1, asm.DWord),
		asm.LoadMem(asm.R3, asm.R6, 0, asm.DWord), // regs
		asm.Add.Imm(asm.R3, bpfasm.PtRegsSP),
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, int32(spOff)),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnProbeReadKernel.Call(),
		asm.LoadMem(asm.R3, asm.R10, spOff, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, int32(spwordOff)),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnProbeReadUser.Call(),
	}...)
}

// stackID stores the bpf_get_stackid of the user stack at fp+idOff.
func stackID(stacks int, idOff int16) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.LoadMapPtr(asm.R2, stacks),
		asm.Mov.Imm(asm.R3, bpfasm.UserStack),
		asm.FnGetStackid.Call(),
		asm.StoreMem(asm.R10, idOff, asm.R0, asm.Word),
	}
}

// linkRegister stores the user's LR (regs->regs[30], arm64) at fp+lrOff.
func linkRegister(lrOff int16) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R10, lrOff, asm.R1, asm.DWord),
		asm.LoadMem(asm.R3, asm.R6, 0, asm.DWord), // regs
		asm.Add.Imm(asm.R3, bpfasm.PtRegsLRARM64),
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, int32(lrOff)),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnProbeReadKernel.Call(),
	}
}

// addOne adds 1 to map m's value under the key at fp+keyOff, inserting it
// the first time (fp+oneOff is scratch), and returns 0 from the program
// at the label exit.
func addOne(m int, keyOff, oneOff int16) asm.Instructions {
	return slices.Concat(
		bpfasm.Lookup(m, keyOff),
		asm.Instructions{
			asm.JNE.Imm(asm.R0, 0, "add"),
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreMem(asm.R10, oneOff, asm.R1, asm.DWord),
		},
		bpfasm.InsertNew(m, keyOff, oneOff),
		asm.Instructions{asm.JEq.Imm(asm.R0, 0, "exit")},
		// Another CPU inserted it first: look it up again and add.
		bpfasm.Lookup(m, keyOff),
		asm.Instructions{
			asm.JEq.Imm(asm.R0, 0, "exit"),
			asm.Mov.Imm(asm.R1, 1).WithSymbol("add"),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),

			asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
			asm.Return(),
		},
	)
}

// Counts returns the syscalls counted so far, by number.
func (c *Counter) Counts() (map[int]uint64, error) {
	out := map[int]uint64{}
	var per []uint64
	for id := uint32(0); id <= MaxSyscall; id++ {
		if err := c.counts.Lookup(id, &per); err != nil {
			return nil, fmt.Errorf("reading syscall %d: %w", id, err)
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		if sum > 0 {
			out[int(id)] = sum
		}
	}
	return out, nil
}

// SetStacks turns counting by stack on or off.
func (c *Counter) SetStacks(on bool) error {
	var v uint64
	if on {
		v = 1
	}
	return c.ctl.Put(uint32(0), v)
}

// StackCounts returns the syscalls counted by stack so far.
func (c *Counter) StackCounts() (map[StackKey]uint64, error) {
	out := map[StackKey]uint64{}
	var k StackKey
	var v uint64
	it := c.stackCnts.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	return out, it.Err()
}

// Stack returns the user stack of id, innermost first.
func (c *Counter) Stack(id int32) ([]uint64, error) {
	var st [bpfasm.StackDepth]uint64
	if err := c.stacks.Lookup(uint32(id), &st); err != nil {
		return nil, err
	}
	var out []uint64
	for _, pc := range st {
		if pc == 0 {
			break
		}
		out = append(out, pc)
	}
	return out, nil
}

// Close detaches the program and frees the maps.
func (c *Counter) Close() error {
	var errs []error
	if c.link != nil {
		errs = append(errs, c.link.Close())
	}
	if c.prog != nil {
		errs = append(errs, c.prog.Close())
	}
	for _, m := range []*ebpf.Map{c.counts, c.ctl, c.stacks, c.stackCnts} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	c.link, c.prog, c.counts, c.ctl, c.stacks, c.stackCnts = nil, nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

// Delta subtracts two snapshots of Counts.
func Delta(before, after map[int]uint64) map[int]uint64 {
	out := map[int]uint64{}
	for id, a := range after {
		if d := a - before[id]; d > 0 {
			out[id] = d
		}
	}
	return out
}

// Site is one stack's syscalls, symbolized.
type Site struct {
	Name  string
	Stack []wire.PCFrames // innermost first
	Count uint64
}

// Sites symbolizes the stack counts gathered between two snapshots.
// The stack starts at the function that made the syscall, then the word at
// the user SP when it is a text address (the caller that the frame-pointer
// walk skips when that function is frameless), then the rest of the walk.
// The sites come in no set order; Profile orders them.
func (c *Counter) Sites(before, after map[StackKey]uint64, sym *elfsym.Table) []Site {
	var out []Site
	for k, a := range after {
		n := a - before[k]
		if n == 0 {
			continue
		}
		var pcs []uint64
		if k.StackID >= 0 {
			st, err := c.Stack(k.StackID)
			if err == nil && len(st) > 0 {
				pcs = append(pcs, st[0]+1) // the ip is not a return PC
				if sym.InText(k.SPWord) && (len(st) < 2 || k.SPWord != st[1]) {
					pcs = append(pcs, k.SPWord)
				}
				pcs = append(pcs, st[1:]...)
			}
		}
		out = append(out, Site{Name: Name(int(k.ID)), Stack: sym.Frames(pcs), Count: n})
	}
	return out
}
