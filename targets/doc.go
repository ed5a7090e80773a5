// Package targets holds perfspy's benchmark servers, each a main package in
// a folder of its own with switches whose per-request cost is known
// (README.md lists them). The tests of this package hold each target to
// those costs with independent oracles: the kernel's counters, strace, the
// heap profile.
package targets
