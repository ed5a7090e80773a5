// Package probe is the front of perfspy: it wraps an unchanged Go server,
// builds it with the agent (internal/withagent), starts it, warms it up and
// opens dump windows (a snapshot, a bounded load from package load, a
// second snapshot), and divides every figure by the requests the load
// driver counted: allocations (allocspy), bytes copied (copyspy), syscalls
// (syscalls), off-CPU time (offcpu), CPU and latency.
//
// Main is the probe command (run, ab, bulk); Run measures one build and
// writes a results folder (summary.json v1, bench.txt, pprof profiles,
// report.md, meta); AB compares two revisions in interleaved rounds. The
// JSON it writes is package schema's types, its pages and tables are
// package report's writers; the output contracts are in docs/probe.md.
package probe
