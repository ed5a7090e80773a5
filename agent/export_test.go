package agent

import "github.com/perfspy/perfspy/agent/wire"

// RetainedSince takes the heap in use now and returns what has grown
// since when called, as a retained window reports it. (The work measured
// runs outside the agent's frames: the agent's own is left out.)
func RetainedSince() func() wire.RetainedReport {
	before := readLive()
	return func() wire.RetainedReport { return readLive().grown(before) }
}
