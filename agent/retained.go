package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/perfspy/perfspy/agent/wire"
)

// liveHeap is the heap in use by stack, objects and bytes, after two GCs
// (the heap profile publishes a cycle's frees at the end of the next).
type liveHeap map[[32]uintptr][2]int64

func readLive() liveHeap {
	runtime.GC()
	runtime.GC()
	n, _ := runtime.MemProfile(nil, false)
	var recs []runtime.MemProfileRecord
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			break
		}
	}
	live := make(liveHeap, n)
	for _, r := range recs[:n] {
		v := live[r.Stack0]
		live[r.Stack0] = [2]int64{v[0] + r.InUseObjects(), v[1] + r.InUseBytes()}
	}
	return live
}

// grown is what grew since before: the stacks whose objects in use grew,
// but the agent's own, the runtime's alone and sudogs (wire.RetainedReport).
func (after liveHeap) grown(before liveHeap) wire.RetainedReport {
	r := wire.RetainedReport{Sites: []wire.RetainedSite{}}
	for stk, v := range after {
		d := [2]int64{v[0] - before[stk][0], v[1] - before[stk][1]}
		// Bytes grew: a site whose objects were replaced by bigger ones
		// (a slice, a map's tables) keeps the growth, with no object more.
		if d[1] <= 0 {
			continue
		}
		if d[0] < 0 {
			d[0] = 0
		}
		pcs := stk[:]
		for len(pcs) > 0 && pcs[len(pcs)-1] == 0 {
			pcs = pcs[:len(pcs)-1]
		}
		stack := Symbolize(pcs)
		if notRetained(stack) {
			continue
		}
		stack = wire.MarkTruncated(stack, stk[len(stk)-1] != 0)
		r.Sites = append(r.Sites, wire.RetainedSite{Stack: stack, Objects: d[0], Bytes: d[1]})
	}
	return r
}

// ownPrefix is the agent's package path, as its functions are named.
var ownPrefix = func() string {
	pc, _, _, _ := runtime.Caller(0)
	name := runtime.FuncForPC(pc).Name()
	return name[:strings.LastIndex(name, "/agent.")+len("/agent")]
}()

// notRetained reports whether a stack's objects are the agent's, the
// runtime's alone, or sudogs: not a request's.
func notRetained(stack []wire.PCFrames) bool {
	user := false
	for _, pf := range stack {
		for _, f := range pf.Frames {
			if own := strings.TrimPrefix(f.Func, ownPrefix); own != f.Func && (own[0] == '.' || own[0] == '/') || f.Func == "runtime.acquireSudog" {
				return true
			}
			user = user || !wire.IsRuntime(f.Func)
		}
	}
	return !user
}

// goroutineDump is every goroutine's stack with its creator (debug=2).
// With leaks set and a runtime that has the goroutine leak profile (Go
// 1.27), the dump is that profile's at debug=2: a GC that finds the
// goroutines blocked for good (on a channel or lock no running goroutine
// can reach) runs first, and the dump marks them "(leaked)".
func goroutineDump(path string, leaks bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	p := pprof.Lookup("goroutine")
	if lp := pprof.Lookup("goroutineleak"); leaks && lp != nil {
		p = lp
	}
	if err := p.WriteTo(f, 2); err != nil {
		f.Close()
		return fmt.Errorf("writing the goroutines: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if !leaks {
		return nil
	}
	return os.WriteFile(path+".profile", []byte(p.Name()), 0o644)
}

// settleGoroutines gives goroutines on their way out (a handler finishing
// after its response) until their number holds for 10 ms, at most 200 ms.
func settleGoroutines() {
	prev, same := -1, 0
	for i := 0; i < 200 && same < 10; i++ {
		n := runtime.NumGoroutine()
		if n == prev {
			same++
		} else {
			prev, same = n, 0
		}
		time.Sleep(time.Millisecond)
	}
}

// beginRetained takes the heap in use and the goroutines at a retained
// window's begin: path+".goroutines".
func (w *window) beginRetained(path string) error {
	w.live = readLive()
	return goroutineDump(path+".goroutines", false)
}

// endRetained writes what the window left: path+".json" (a
// wire.RetainedReport) and path+".goroutines.end".
func (w *window) endRetained(path string) error {
	settleGoroutines()
	r := readLive().grown(w.live)
	w.live = nil
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".json", b, 0o644); err != nil {
		return err
	}
	return goroutineDump(path+".goroutines.end", true)
}
