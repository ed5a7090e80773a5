package allocspy

import (
	"regexp"
)

// A release is one Go release's allocation entries: the shapes the overlay
// expects of them, checked before anything is patched. Each release has
// its entry (release_go1NN.go), checked against that release's GOROOT by
// TestOverlayReleases; a release with no entry is refused by name
// (gorelease.Of). Adding a release is one reviewed entry.
type release struct {
	// mallocgcReturns are the return statements mallocgc may have, and
	// how many of each: any other means its allocation entry changed. Its
	// last `return x` gets the recorder's call.
	mallocgcReturns map[string]int
	// refusedExperiment is a GOEXPERIMENT that makes the compiler call
	// allocators this entry does not patch ("" if none).
	refusedExperiment string
	// generated are the size-specialized allocators (nil where they are
	// not reached by default).
	generated *generatedShape
}

// generatedShape is runtime/malloc_generated.go: allocators that mallocgc
// dispatches small sizes to and that the compiler calls directly for small
// `new`s, and the slow paths they return through.
type generatedShape struct {
	file string
	// entries match the allocators mallocgc and the compiler call: their
	// `return x` records with skip 0. slowPaths match the functions the
	// entries return through: theirs record with skip 1, the entry's frame.
	entries, slowPaths *regexp.Regexp
	nEntries, nSlow    int
	// nRecords are the returns of an object that get the recorder's call.
	nRecords int
	// returns are each return statement the functions may have: true if
	// it is an allocation's end and records, false if it returns another
	// function's result, which records itself (or is the debug.malloc
	// hook's early return, which the heap profile does not see either).
	returns map[string]bool
}

// allocspySignature is the signature of mallocgc and of every
// size-specialized entry.
const allocspySignature = "func(size uintptr, typ *_type, needzero bool) unsafe.Pointer"

// releases are the Go releases the overlay knows.
var releases = map[string]*release{
	"go1.26": &go126,
	"go1.27": &go127,
}
