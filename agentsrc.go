// Package perfspy carries the sources of the probe agent (agent/ and the
// packages under it) inside every binary that imports it, so that probe can
// add the agent to a target's build without a perfspy source tree: probe
// writes them out as a module of their own, github.com/perfspy/perfspy/agent,
// with no requirements (see docs/probe.md, "How the agent gets in").
package perfspy

import "embed"

// AgentSource holds agent/ and every package under it, tests included;
// agentmod writes out what a build needs.
//
//go:embed agent
var AgentSource embed.FS

// DefaultTarget holds targets/httpjson, probe run's default target, for a
// probe that runs without a perfspy source tree.
//
//go:embed targets/httpjson/*.go
var DefaultTarget embed.FS
