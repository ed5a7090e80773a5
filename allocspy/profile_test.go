package allocspy

import (
	"testing"

	"github.com/perfspy/perfspy/agent/wire"
)

func frames(pc uint64, funcs ...string) wire.PCFrames {
	pf := wire.PCFrames{PC: pc}
	for _, f := range funcs {
		pf.Frames = append(pf.Frames, wire.Frame{Func: f, File: "x.go", Line: 1})
	}
	return pf
}

// TestNestedAlloc: a sudog the GC takes inside a user's allocation is
// charged to the runtime function that took it, under the user's line;
// the user's own allocation keeps the user's line as its leaf.
func TestNestedAlloc(t *testing.T) {
	user := []wire.PCFrames{frames(1, "runtime.makeslice"), frames(2, "main.handler"), frames(3, "main.main")}
	nested := []wire.PCFrames{
		frames(10, "runtime.newobject"), frames(11, "runtime.acquireSudog"),
		frames(12, "runtime.semacquire1", "runtime.semacquire"), frames(13, "runtime.gcMarkDone"),
		frames(14, "runtime.gcAssistAlloc"), frames(15, "runtime.deductAssistCredit", "runtime.mallocgc"),
		frames(1, "runtime.makeslice"), frames(2, "main.handler"), frames(3, "main.main"),
	}
	if NestedAlloc(user) || !NestedAlloc(nested) {
		t.Fatalf("NestedAlloc: user %v, nested %v", NestedAlloc(user), NestedAlloc(nested))
	}
	p := Profile(&wire.AllocReport{Sites: []wire.AllocSite{
		{Stack: user, Objects: 100, AllocBytes: 6400},
		{Stack: nested, Objects: 1, AllocBytes: 96},
	}})
	leaves := map[string]int64{}
	for _, s := range p.Sample {
		leaves[s.Location[0].Line[0].Function.Name] += s.Value[0]
		if s.Label["via"][0] == "" {
			t.Errorf("sample without via: %v", s.Label)
		}
	}
	if leaves["main.handler"] != 100 || leaves["runtime.acquireSudog"] != 1 || len(leaves) != 2 {
		t.Errorf("leaves %v; want main.handler 100, runtime.acquireSudog 1", leaves)
	}
	if err := p.CheckValid(); err != nil {
		t.Error(err)
	}
}
