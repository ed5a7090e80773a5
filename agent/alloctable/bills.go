package alloctable

import (
	"fmt"
	_ "unsafe" // for go:linkname

	"github.com/perfspy/perfspy/agent"
	"github.com/perfspy/perfspy/agent/internal/spytable"
	"github.com/perfspy/perfspy/agent/wire"
)

//go:linkname perfspyBillStart runtime.perfspyBillStart
func perfspyBillStart(every uint32)

//go:linkname perfspyBillStop runtime.perfspyBillStop
func perfspyBillStop() uint64

//go:linkname perfspyBillRead runtime.perfspyBillRead
func perfspyBillRead(dst []uint64) int

//go:linkname perfspyBillStartLive runtime.perfspyBillStartLive
func perfspyBillStartLive()

//go:linkname perfspyBillReadEnded runtime.perfspyBillReadEnded
func perfspyBillReadEnded(dst []uint64) (n int, began, missed uint64)

//go:linkname perfspyBillLayout runtime.perfspyBillLayout
func perfspyBillLayout() (bills, sites, billSize int)

// Bill layout, as the runtime file declares it: begin, end, route, the
// overflow's objects and bytes, then billSites entries of key, count and
// bytes (the key is the allocspy slot's index plus one; kind 0 above bit
// 32), then the time by part (wire.BillParts, ns), the syscalls, the
// peer (the HTTP/1 connection's remote port and the request's number on
// it), billWaits wait stacks of key, ns, part and waitDepth PCs,
// sysNrs syscall numbers (plus one) with their counts, then copySites
// entries of key (the copyspy slot's index plus one), calls and bytes,
// two overflow entries (memmove, memclr) of the same shape, and the take
// that holds the bill.
const (
	billHeader = 5
	billSites  = 64
	billTime   = billHeader + 3*billSites
	billParts  = 10 // len(wire.BillParts)
	billPeer   = billTime + billParts + 1
	billWaits  = 8
	waitDepth  = 8
	waitWords  = 3 + waitDepth
	billSysNrs = billPeer + 1 + billWaits*waitWords
	sysNrs     = 8
	billCopies = billSysNrs + 2*sysNrs
	copySites  = 32
	copyOver   = billCopies + 3*copySites
	billGen    = copyOver + 3*2
	billWords  = billGen + 1
)

// bills is the "bills" counter: each request of the window with its own
// allocations by site.
type bills struct {
	buf   []uint64
	every int
}

func (b *bills) Begin() error {
	_, sites, size := perfspyBillLayout()
	if sites != billSites || size != billWords*8 || len(wire.BillParts) != billParts {
		return fmt.Errorf("bills: runtime layout %d sites of %d B, this reader knows %d of %d B and %d time parts (wire has %d)", sites, size, billSites, billWords*8, billParts, len(wire.BillParts))
	}
	b.every = agent.BillEvery()
	perfspyBillStart(uint32(b.every))
	return nil
}

// End stops billing and writes the bills of the requests that ended.
func (b *bills) End(path string) error {
	began := perfspyBillStop()
	kept, _, _ := perfspyBillLayout()
	// The buffer (13 MiB) is made once the load has stopped, not as the
	// window opens: a GC it would start runs beside no request.
	if b.buf == nil {
		b.buf = make([]uint64, kept*billWords)
	}
	n := perfspyBillRead(b.buf)
	rep := &wire.BillReport{Began: began, Every: b.every, Cap: kept - 1}
	decode(rep, b.buf[:n], spytable.Routes())
	return wire.WriteJSON(path, rep)
}

// decode adds the bills in words (billWords each) to rep: those whose
// requests ended to rep.Bills, the others to rep.Open.
func decode(rep *wire.BillReport, words []uint64, names []string) {
	seen := map[uint64]bool{}
	for i := 0; i+billWords <= len(words); i += billWords {
		w := words[i : i+billWords]
		if w[1] == 0 || w[1] < w[0] {
			rep.Open++
			continue
		}
		bill := wire.Bill{DurationNS: w[1] - w[0], Route: spytable.RouteName(names, w[2]), OverObjects: w[3], OverBytes: w[4]}
		bill.PartsNS = append([]uint64(nil), w[billTime:billTime+billParts]...)
		bill.Syscalls, bill.Peer = w[billPeer-1], w[billPeer]
		bill.Waits = waits(rep, w[billPeer+1:billSysNrs], seen)
		for e := billSysNrs; e < billCopies; e += 2 {
			if w[e] != 0 && w[e+1] != 0 {
				bill.SyscallNrs = append(bill.SyscallNrs, wire.BillSyscall{Nr: int(w[e] - 1), Count: w[e+1]})
			}
		}
		for e := billCopies; e < copyOver; e += 3 {
			if w[e] != 0 && w[e+1] != 0 {
				bill.Copies = append(bill.Copies, wire.BillCopy{Slot: w[e], Calls: w[e+1], Bytes: w[e+2]})
			}
		}
		bill.OverCopies = [2]wire.BillCopy{{Calls: w[copyOver+1], Bytes: w[copyOver+2]}, {Calls: w[copyOver+4], Bytes: w[copyOver+5]}}
		for e := billHeader; e < billTime; e += 3 {
			key := w[e]
			if key == 0 || key>>32 != 0 {
				continue
			}
			bill.Allocs = append(bill.Allocs, wire.BillSite{Slot: key, Objects: w[e+1], Bytes: w[e+2]})
		}
		rep.Bills = append(rep.Bills, bill)
	}
}

// liveRead reads the bills of the requests that ended since the last
// read, and gives them back to the runtime for the next requests. It reads
// them liveChunk at a time, into a buffer of that size (a whole table's
// would hold 13 MiB in a live program for its life).
func liveRead(names []string) *wire.BillReport {
	kept, _, _ := perfspyBillLayout()
	if liveBuf == nil {
		liveBuf = make([]uint64, liveChunk*billWords)
	}
	rep := &wire.BillReport{Every: 1, Cap: kept - 1}
	for {
		n, began, missed := perfspyBillReadEnded(liveBuf)
		rep.Began, rep.Missed = began, missed
		decode(rep, liveBuf[:n], names)
		if n+billWords > len(liveBuf) {
			continue // full: more may have ended
		}
		return rep
	}
}

// liveChunk is how many bills liveRead takes from the runtime at once.
const liveChunk = 256

// liveBuf is liveRead's buffer (the live loop reads on one goroutine).
var liveBuf []uint64

// waits reads a bill's wait stacks (words past its peer): each one's time
// on the bill, and each stack new to the report symbolized into it once.
func waits(rep *wire.BillReport, w []uint64, seen map[uint64]bool) []wire.BillWait {
	var out []wire.BillWait
	for i := 0; i+waitWords <= len(w); i += waitWords {
		key, ns, part := w[i], w[i+1], w[i+2]
		if key == 0 || ns == 0 {
			continue
		}
		out = append(out, wire.BillWait{Key: key, NS: ns})
		if seen[key] {
			continue
		}
		seen[key] = true
		var pcs []uintptr
		for _, pc := range w[i+3 : i+waitWords] {
			if pc != 0 {
				pcs = append(pcs, uintptr(pc))
			}
		}
		rep.WaitStacks = append(rep.WaitStacks, wire.BillWaitStack{Key: key, Part: int(part), Stack: agent.Symbolize(pcs)})
	}
	return out
}
