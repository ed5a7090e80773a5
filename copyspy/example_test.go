package copyspy_test

import (
	"fmt"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/copyspy"
)

// A window's copy report, as the agent writes it, made a pprof profile and
// grouped by site: the leaf is the first frame outside the runtime.
func ExampleProfile() {
	frame := func(pc uint64, fn string) wire.PCFrames {
		return wire.PCFrames{PC: pc, Frames: []wire.Frame{{Func: fn, File: "x.go", Line: 1}}}
	}
	rep := &wire.CopyReport{Sites: []wire.CopySite{{
		Kind:  "memmove",
		Stack: []wire.PCFrames{frame(0x10, "runtime.growslice"), frame(0x20, "main.appendRows"), frame(0x30, "main.main")},
		Calls: [4]uint64{0, 100, 0, 0},
		Bytes: [4]uint64{0, 51200, 0, 0},
	}}}
	p := copyspy.Profile(rep)
	fmt.Println(p.SampleType[0].Type, p.SampleType[1].Type, p.Sample[0].Label["bucket"], p.Sample[0].Label["via"])
	for _, s := range copyspy.Sites(rep) {
		fmt.Printf("%s via %s: %d calls, %d bytes\n", s.User, s.Direct, s.TotalCalls(), s.TotalBytes())
	}
	// Output:
	// copy_calls copied_bytes [<1K] [runtime.growslice]
	// main.appendRows via runtime.growslice: 100 calls, 51200 bytes
}
