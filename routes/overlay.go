// Package routes makes the request the unit of attribution: a mark on the
// goroutine that serves a request, naming its route, that the goroutines it
// starts inherit, so that allocspy's and copyspy's recorders charge each
// allocation and copy to the route of the request that caused it, and work
// outside any request to the background.
//
// RuntimeOverlay adds the mark to the runtime: a field of g (perfspyMark),
// copied to each goroutine a user goroutine starts, as the runtime copies
// pprof labels (newproc1), and cleared when a goroutine ends; and the route
// table (names, requests per route). HTTPFile is the net/http side
// (offcpu's overlay adds it): the mark set when a request begins (method and
// path, numeric and UUID segments folded), moved to the ServeMux pattern
// when the mux matches one, and cleared when the request ends.
package routes

import (
	_ "embed"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/capability"
)

//go:embed runtime/zz_perfspy_mark.go.txt
var runtimeGo string

//go:embed runtime/zz_perfspy_hand.go.txt
var handGo string

// runtimeFile is the file RuntimeOverlay adds to package runtime.
const runtimeFile = "zz_perfspy_mark.go"

// handFile is the file with the handoffs: the request a channel's value,
// a timer's function or a new goroutine carries.
const handFile = "zz_perfspy_hand.go"

// Edit replaces the one occurrence of Old in a GOROOT file with New; each
// stays on its line, so that line numbers in profiles do not move.
type Edit struct{ File, Old, New string }

// ApplyEdits reads the files of edits from dir (a GOROOT package folder)
// and returns their texts with the edits made, by path. what names the
// overlay in a shape error: a file without exactly one Old is a Go release
// the overlay does not know.
func ApplyEdits(dir, what string, edits []Edit) (map[string]string, error) {
	files := map[string]string{}
	for _, e := range edits {
		path := filepath.Join(dir, e.File)
		text, ok := files[path]
		if !ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, capability.Shape(what, "%v", err)
			}
			text = string(b)
		}
		if n := strings.Count(text, e.Old); n != 1 {
			first, _, _ := strings.Cut(strings.TrimLeft(e.Old, "\t\n"), "\n")
			return nil, capability.Shape(what, "%s has %d of %q, want 1 (a Go release this overlay does not know)", path, n, first)
		}
		files[path] = strings.Replace(text, e.Old, e.New, 1)
	}
	return files, nil
}

var runtimeEdits = []Edit{
	{"runtime2.go",
		"\tlabels          unsafe.Pointer // profiler labels\n",
		"\tlabels          unsafe.Pointer; perfspyMark, perfspyBill uintptr; perfspyBillGen uint64; perfspyStamp int64; perfspyOwn bool; perfspyReq uint64; perfspyReqOwner bool; perfspyInTimer uintptr; perfspyWaitHand, perfspyWaitElse bool; perfspyFor uint64; perfspyHeld int32 // profiler labels; perfspy's request mark (route index, 0 none), bill and its take, the bill's last state change, whether the goroutine serves the billed request, the request it serves as its own (0: none, or its mark was handed to it) and whether it began it, the timer whose function it runs, whether its wait ended by its own request's worker or by work unfollowed or another request's, the request it works for (own, started by it or handed it) and the values it was handed and holds\n"},
	// A new goroutine works for the request its creator works for, or,
	// started by a timer's function (time.AfterFunc), for the request
	// that set the timer.
	{"proc.go",
		"\t\tnewg.bubble = callergp.bubble\n",
		"\t\tnewg.bubble = callergp.bubble; perfspyInherit(newg, mp.curg, callergp)\n"},
	// A goroutine that ends (gdestroy) ends the bill of the call it
	// served when grpc-go's labels marked it, and a g reused from the
	// free list starts unmarked.
	{"proc.go",
		"\tgp.labels = nil\n\tgp.timer = nil\n",
		"\tgp.labels = nil; perfspyBillGone(gp); perfspySetMark(gp, 0); gp.perfspyBill = 0; gp.perfspyOwn = false; perfspyReqGone(gp); gp.perfspyInTimer = 0; gp.perfspyWaitHand, gp.perfspyWaitElse = false, false; gp.perfspyFor = 0; gp.perfspyHeld = 0\n\tgp.timer = nil\n"},
	// A goroutine scheduled whose request ended (a goroutine the request
	// started that outlives it, a worker handed it) works for no route
	// from now on: its work is its route's unfollowed work.
	{"proc.go",
		"\tgp.syncSafePoint = false // Clear the flag, which may have been set by morestack.\n",
		"\tgp.syncSafePoint = false; if gp.perfspyFor != 0 { perfspyStale(gp) } // Clear the flag, which may have been set by morestack.\n"},
	// A billed goroutine's state changes add its time to the bill by
	// state (running, runnable, in a syscall, waiting and why).
	{"proc.go",
		"\tif gp.bubble != nil {\n\t\tsystemstack(func() {\n\t\t\tgp.bubble.changegstatus(gp, oldval, newval)\n",
		"\tif gp.perfspyBill != 0 { perfspyBillState(gp, oldval, newval) }; if gp.bubble != nil {\n\t\tsystemstack(func() {\n\t\t\tgp.bubble.changegstatus(gp, oldval, newval)\n"},
	// The syscall fast paths skip casgstatus: a billed goroutine takes it.
	{"proc.go",
		"\tif gp.bubble != nil || !gp.atomicstatus.CompareAndSwap(_Grunning, _Gsyscall) {\n",
		"\tif gp.bubble != nil || gp.perfspyBill != 0 || !gp.atomicstatus.CompareAndSwap(_Grunning, _Gsyscall) {\n"},
	{"proc.go",
		"\tif gp.bubble != nil || !gp.atomicstatus.CompareAndSwap(_Gsyscall, _Grunning) {\n",
		"\tif gp.bubble != nil || gp.perfspyBill != 0 || !gp.atomicstatus.CompareAndSwap(_Gsyscall, _Grunning) {\n"},
}

// handEdits carry a request across a channel (docs/routes.md, "Handoffs"):
// a value put in a buffered channel's slot leaves its sender's request
// beside it (perfspyHandPut), the goroutine that takes it works for that
// request from then on (perfspyHandTake); a direct handoff to a waiting
// receiver (send) or from a waiting sender (recv) passes it goroutine to
// goroutine. A timer's function runs with the timer noted on its
// goroutine: its sends carry no request, and the goroutines it starts
// (time.AfterFunc's) work for the request that set the timer.
var handEdits = []Edit{
	// The buffered values at a channel's head that carry no request
	// (perfspyHandUnkept), in the two bytes of padding between elemsize
	// and closed: no channel is made larger.
	{"chan.go",
		"\telemsize uint16\n\tclosed   uint32\n",
		"\telemsize uint16; perfspyUnkept uint16 // and the buffered values at the head with no entry in perfspyHandTab\n\tclosed   uint32\n"},
	{"chan.go",
		"\t\ttypedmemmove(c.elemtype, qp, ep)\n\t\tc.sendx++\n",
		"\t\ttypedmemmove(c.elemtype, qp, ep); perfspyHandPut(c, c.sendx)\n\t\tc.sendx++\n"},
	{"chan.go",
		"\t\ttypedmemclr(c.elemtype, qp)\n\t\tc.recvx++\n",
		"\t\ttypedmemclr(c.elemtype, qp); perfspyHandTake(c, c.recvx)\n\t\tc.recvx++\n"},
	{"chan.go",
		"\t\tsg.elem.set(nil)\n\t}\n\tgp := sg.g\n",
		"\t\tsg.elem.set(nil)\n\t}\n\tgp := sg.g; perfspyHandSend(gp)\n"},
	{"chan.go",
		"\tif c.dataqsiz == 0 {\n\t\tif raceenabled {\n\t\t\tracesync(c, sg)\n",
		"\tperfspyHandRecv(c, sg.g); if c.dataqsiz == 0 {\n\t\tif raceenabled {\n\t\t\tracesync(c, sg)\n"},
	{"chan.go",
		"\t\t\ttypedmemclr(c.elemtype, sg.elem.get())\n\t\t\tsg.elem.set(nil)\n\t\t}\n\t\tif sg.releasetime != 0 {\n\t\t\tsg.releasetime = cputicks()\n\t\t}\n\t\tgp := sg.g\n",
		"\t\t\ttypedmemclr(c.elemtype, sg.elem.get())\n\t\t\tsg.elem.set(nil)\n\t\t}\n\t\tif sg.releasetime != 0 {\n\t\t\tsg.releasetime = cputicks()\n\t\t}\n\t\tgp := sg.g; perfspyHandClose(gp)\n"},
	{"chan.go",
		"\t\tgoready(gp, 3)\n\t}\n}\n",
		"\t\tgoready(gp, 3)\n\t}; perfspyHandClosed()\n}\n"},
	{"select.go",
		"\ttypedmemclr(c.elemtype, qp)\n\tc.recvx++\n",
		"\ttypedmemclr(c.elemtype, qp); perfspyHandTake(c, c.recvx)\n\tc.recvx++\n"},
	{"select.go",
		"\ttypedmemmove(c.elemtype, chanbuf(c, c.sendx), cas.elem)\n",
		"\ttypedmemmove(c.elemtype, chanbuf(c, c.sendx), cas.elem); perfspyHandPut(c, c.sendx)\n"},
	{"time.go",
		"\tt.modify(when, period, f, arg, 0)\n\tt.init = true\n",
		"\tt.modify(when, period, f, arg, 0); if c == nil { perfspyTimerSet(&t.timer) }\n\tt.init = true\n"},
	{"time.go",
		"\treturn t.reset(when, period)\n",
		"\tif !t.isChan { perfspyTimerSet(&t.timer) }; return t.reset(when, period)\n"},
	{"time.go",
		"\treturn t.stop()\n}\n",
		"\tif !t.isChan { perfspyTimerStop(&t.timer) }; return t.stop()\n}\n"},
	// A sync.Cond's Signal and Broadcast hand the signaller's request to
	// the goroutine they wake: a queue guarded by a mutex and a Cond.
	{"sema.go",
		"\t\treadyWithTime(s, 4)\n\t\ts = next\n",
		"\t\tperfspyHandSignal(s.g); readyWithTime(s, 4)\n\t\ts = next\n"},
	{"sema.go",
		"\t\t\treadyWithTime(s, 4)\n\t\t\treturn\n",
		"\t\t\tperfspyHandSignal(s.g); readyWithTime(s, 4)\n\t\t\treturn\n"},
	{"time.go",
		"\tf(arg, seq, delay)\n",
		"\tperfspyTimerGp := getg(); perfspyTimerGp.perfspyInTimer = uintptr(unsafe.Pointer(t)); f(arg, seq, delay); perfspyTimerGp.perfspyInTimer = 0\n"},
}

// syscallEdits count each syscall package syscall makes, by number, on
// the bill of the request that makes it (the runtime's
// perfspySyscallNote), just before entersyscall.
var syscallEdits = []Edit{
	{"syscall_linux.go",
		"\truntime_entersyscall()\n\t// N.B. Calling RawSyscall here is unsafe",
		"\tperfspySyscallNote(trap); runtime_entersyscall()\n\t// N.B. Calling RawSyscall here is unsafe"},
	{"syscall_linux.go",
		"\truntime_entersyscall()\n\tr1, r2, err = RawSyscall6(trap, a1, a2, a3, a4, a5, a6)\n",
		"\tperfspySyscallNote(trap); runtime_entersyscall()\n\tr1, r2, err = RawSyscall6(trap, a1, a2, a3, a4, a5, a6)\n"},
}

// syscallFile is the file the overlay adds to package syscall: the
// runtime function's declaration.
const syscallFile = `//go:build linux

// Code added to package syscall by perfspy's routes overlay. DO NOT EDIT.

package syscall

import _ "unsafe" // go:linkname

//go:linkname perfspySyscallNote runtime.perfspySyscallNote
func perfspySyscallNote(nr uintptr)
`

// RuntimeOverlay writes the runtime files with the request mark into dir
// and returns the go build -overlay Replace entries, keyed by GOROOT
// paths. allocspy's and copyspy's overlays include it: their recorders
// read the mark. Each call writes the same content.
func RuntimeOverlay(goroot, dir string) (map[string]string, error) {
	rt := filepath.Join(goroot, "src", "runtime")
	files, err := ApplyEdits(rt, "request mark", append(append([]Edit(nil), runtimeEdits...), handEdits...))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(rt, runtimeFile)); err == nil {
		return nil, capability.Shape("request mark", "%s already exists in GOROOT", runtimeFile)
	}
	files[filepath.Join(rt, runtimeFile)] = strings.NewReplacer("SOCKETENV", wire.SocketEnv, "PUSHENV", wire.PushEnv, "MARKSENV", wire.MarksEnv).Replace(runtimeGo)
	files[filepath.Join(rt, handFile)] = handGo
	sys := filepath.Join(goroot, "src", "syscall")
	sysFiles, err := ApplyEdits(sys, "request mark", syscallEdits)
	if err != nil {
		return nil, err
	}
	maps.Copy(files, sysFiles)
	files[filepath.Join(sys, "zz_perfspy_syscall.go")] = syscallFile
	out := map[string]string{}
	for path, text := range files {
		dst := filepath.Join(dir, "mark_"+filepath.Base(filepath.Dir(path))+"_"+filepath.Base(path))
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			return nil, err
		}
		out[path] = dst
	}
	return out, nil
}
