// Package diff compares two builds' profiles function by function on the
// normalized keys of package profkey, so that what is not a change (a
// renumbered closure, a generic instantiation spelled another way, a build
// directory, a module version) does not show as one. It is allocdiff's
// engine (Command), and probe ab compares its rounds with it.
//
// Load reads one or more pprof files per side; Compare aggregates them by
// key and returns rows before, after and delta, per request when every file
// carries the perfspy.requests comment, sorted by the size of the change.
// The rows add up to the change of the total; Result.Remainder is what the
// rows not shown add up to.
package diff
