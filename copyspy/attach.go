package copyspy

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
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

// Offsets in struct pt_regs (x86_64) of the registers the probes read.
const (
	ptRegsBX = 40
	ptRegsCX = 88
)

const (
	countsEntries = 1 << 16
	stackEntries  = 1 << 14
)

// hook is one probed function: memmove(to AX, from BX, n CX) or
// memclrNoHeapPointers(ptr AX, n BX), under Go's register ABI.
type hook struct {
	fn    string
	kind  uint32
	nReg  int16
	label string
}

var hooks = []hook{
	{"runtime.memmove", 0, ptRegsCX, "memmove"},
	{"runtime.memclrNoHeapPointers", 1, ptRegsBX, "memclr"},
}

// attachKey is the counts map's key; attachValue its value.
type attachKey struct {
	Caller     uint64 // *(SP) at entry: the direct caller's return PC
	StackID    int32  // user stack above the direct caller, or < 0
	KindBucket uint32 // kind<<8 | size bucket
}

type attachValue struct {
	Calls, Bytes uint64
}

// Session is an attachment to a running process. Every uprobe hit costs
// microseconds: it is a diagnostic, not a benchmark mode.
type Session struct {
	pid    int
	exe    string
	counts *ebpf.Map
	stacks *ebpf.Map
	progs  []*ebpf.Program
	links  []link.Link
	sym    *elfsym.Table
}

// Attach loads the counting programs and attaches them to runtime.memmove
// and runtime.memclrNoHeapPointers of process pid. Stripped binaries work:
// the entries come from .gopclntab.
func Attach(pid int) (*Session, error) {
	if runtime.GOARCH != "amd64" {
		// Its uprobes read memmove's arguments from x86_64's registers.
		return nil, fmt.Errorf("copyspy attach: %w: amd64 only (here %s); the copyspy overlay (probe run) counts copies on %s", capability.ErrNotSupported, runtime.GOARCH, runtime.GOARCH)
	}
	if err := capability.BPF("copyspy attach (the bpf syscall and uprobes)"); err != nil {
		return nil, err
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	exePath := fmt.Sprintf("/proc/%d/exe", pid)
	if _, err := buildinfo.ReadFile(exePath); err != nil {
		return nil, fmt.Errorf("process %d (%s) is not a Go program: %w", pid, exe, err)
	}
	sym, err := elfsym.Open(exePath, pid)
	if err != nil {
		return nil, fmt.Errorf("process %d (%s): %w", pid, exe, err)
	}
	_ = rlimit.RemoveMemlock()
	s := &Session{pid: pid, exe: exe, sym: sym}
	s.counts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "copyspy_counts", Type: ebpf.Hash, KeySize: 16, ValueSize: 16, MaxEntries: countsEntries})
	if err != nil {
		return nil, bpfErr("creating the counts map", err)
	}
	s.stacks, err = ebpf.NewMap(bpfasm.StackMap("copyspy_stacks", stackEntries))
	if err != nil {
		s.Close()
		return nil, bpfErr("creating the stack map", err)
	}
	ex, err := link.OpenExecutable(exePath)
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, h := range hooks {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name: "copyspy_" + h.label, Type: ebpf.Kprobe, License: "GPL",
			Instructions: countProgram(h, uint32(pid), s.counts.FD(), s.stacks.FD()),
		})
		if err != nil {
			s.Close()
			return nil, bpfErr("loading the "+h.label+" program", err)
		}
		s.progs = append(s.progs, prog)
		off, err := sym.FileOffset(h.fn)
		if err != nil {
			s.Close()
			return nil, err
		}
		l, err := ex.Uprobe(h.fn, prog, &link.UprobeOptions{Address: off, PID: pid})
		if err != nil {
			s.Close()
			return nil, bpfErr("attaching a uprobe to "+h.fn, err)
		}
		s.links = append(s.links, l)
	}
	return s, nil
}

func bpfErr(what string, err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%s: %w: %v", what, capability.ErrNotSupported, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// countProgram counts one hit: filtered by tgid, keyed by the direct caller
// (read from *(SP), which bpf_get_stackid skips for a frameless function),
// the user stack, the kind and the size bucket.
func countProgram(h hook, tgid uint32, counts, stacks int) asm.Instructions {
	const (
		keyOff = -16 // attachKey: caller -16, stackid -8, kindBucket -4
		valOff = -32 // attachValue: calls -32, bytes -24
	)
	return slices.Concat(
		bpfasm.OwnProcess(tgid, "exit"),
		asm.Instructions{
			asm.LoadMem(asm.R7, asm.R6, h.nReg, asm.DWord),

			// key.caller = *(u64 *)regs->sp
			asm.Mov.Reg(asm.R1, asm.R10),
			asm.Add.Imm(asm.R1, keyOff),
			asm.Mov.Imm(asm.R2, 8),
			asm.LoadMem(asm.R3, asm.R6, bpfasm.PtRegsSP, asm.DWord),
			asm.FnProbeReadUser.Call(),

			// key.stackid = bpf_get_stackid(ctx, stacks, BPF_F_USER_STACK)
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.LoadMapPtr(asm.R2, stacks),
			asm.Mov.Imm(asm.R3, bpfasm.UserStack),
			asm.FnGetStackid.Call(),
			asm.StoreMem(asm.R10, keyOff+8, asm.R0, asm.Word),

			// key.kindBucket
			asm.Mov.Imm(asm.R8, int32(h.kind<<8)),
			asm.JLT.Imm(asm.R7, 64, "bucket"),
			asm.Add.Imm(asm.R8, 1),
			asm.JLT.Imm(asm.R7, 1024, "bucket"),
			asm.Add.Imm(asm.R8, 1),
			asm.JLT.Imm(asm.R7, 16384, "bucket"),
			asm.Add.Imm(asm.R8, 1),
			asm.StoreMem(asm.R10, keyOff+12, asm.R8, asm.Word).WithSymbol("bucket"),
		},
		bpfasm.Lookup(counts, keyOff),
		asm.Instructions{
			asm.JNE.Imm(asm.R0, 0, "add"),
			// First hit of this key: insert zeros, then look it up again.
			asm.Mov.Imm(asm.R1, 0),
			asm.StoreMem(asm.R10, valOff, asm.R1, asm.DWord),
			asm.StoreMem(asm.R10, valOff+8, asm.R1, asm.DWord),
		},
		bpfasm.InsertNew(counts, keyOff, valOff),
		bpfasm.Lookup(counts, keyOff),
		asm.Instructions{
			asm.JEq.Imm(asm.R0, 0, "exit"),

			asm.Mov.Imm(asm.R1, 1).WithSymbol("add"),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
			asm.Mov.Reg(asm.R2, asm.R0),
			asm.Add.Imm(asm.R2, 8),
			asm.StoreXAdd(asm.R2, asm.R7, asm.DWord),

			asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
			asm.Return(),
		},
	)
}

// Report reads the counts so far and symbolizes them against the binary.
func (s *Session) Report() (*wire.CopyReport, error) {
	rep := &wire.CopyReport{}
	var k attachKey
	var v attachValue
	it := s.counts.Iterate()
	for it.Next(&k, &v) {
		site := wire.CopySite{Kind: "memmove"}
		if k.KindBucket>>8 == 1 {
			site.Kind = "memclr"
		}
		b := k.KindBucket & 0xff
		if b > 3 {
			return nil, fmt.Errorf("bad bucket %d in the counts map", b)
		}
		site.Calls[b] = v.Calls
		site.Bytes[b] = v.Bytes
		pcs := []uint64{k.Caller}
		if k.StackID >= 0 {
			var stack [bpfasm.StackDepth]uint64
			if err := s.stacks.Lookup(uint32(k.StackID), &stack); err == nil {
				// stack[0] is the probed function itself; its caller is
				// missing from the frame-pointer walk and comes from *(SP).
				for _, pc := range stack[1:] {
					if pc == 0 {
						break
					}
					pcs = append(pcs, pc)
				}
			}
		}
		site.Stack = s.sym.Frames(pcs)
		rep.Sites = append(rep.Sites, site)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the counts map: %w", err)
	}
	return rep, nil
}

// Close detaches the probes and frees the maps. It is safe to call twice.
func (s *Session) Close() error {
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	for _, p := range s.progs {
		errs = append(errs, p.Close())
	}
	for _, m := range []*ebpf.Map{s.counts, s.stacks} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	s.links, s.progs, s.counts, s.stacks = nil, nil, nil, nil
	return errors.Join(errs...)
}
