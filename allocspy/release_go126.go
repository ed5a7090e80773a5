package allocspy

// go126: every heap allocation goes through mallocgc. Size-specialized
// malloc is a GOEXPERIMENT, off by default; with it on, the compiler calls
// allocators whose 1.26 shape this entry does not patch, so it is refused.
var go126 = release{
	mallocgcReturns: map[string]int{
		"unsafe.Pointer(&zerobase)":                    1, // size 0: no allocation
		"mallocNoScanTable[size](size, typ, needzero)": 1, // sizespecializedmalloc only
		"mallocScanTable[size](size, typ, needzero)":   1, // sizespecializedmalloc only
		"x": 2, // the debug.malloc hook, and the end
	},
	refusedExperiment: "sizespecializedmalloc",
}
