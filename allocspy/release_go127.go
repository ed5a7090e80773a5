package allocspy

import "regexp"

// go127: size-specialized malloc is on by default. mallocgc hands sizes up
// to 512 B to the generated allocators (its tables, and mallocgcTinySC2
// for the tiny allocator) and keeps the rest; the compiler calls the
// generated SC allocators directly for small `new`s. Each generated
// allocator records where it returns an object, and its slow path (taken
// while the GC marks, or under GODEBUG malloc debugging) records for it.
var go127 = release{
	mallocgcReturns: map[string]int{
		"unsafe.Pointer(&zerobase)":                    1,
		"mallocNoScanTable[size](size, typ, needzero)": 1,
		"mallocScanTable[size](size, typ, needzero)":   1,
		"mallocgcTinySC2(size, typ, needzero)":         1,
		"x":                                            2,
	},
	generated: &generatedShape{
		file:      "malloc_generated.go",
		entries:   regexp.MustCompile(`^mallocgc(SmallScanNoHeader|SmallNoScan|Tiny)SC\d+$`),
		slowPaths: regexp.MustCompile(`^mallocgc(Tiny|SmallScan|SmallNoScan)SlowPath$`),
		nEntries:  14, // SmallScanNoHeaderSC1-7, SmallNoScanSC2-7, TinySC2
		nSlow:     3,
		// SmallNoScanSC2-7 two each (a freed object reused, a new one),
		// SmallScanNoHeaderSC1-7 one, TinySC2 two (packed into the tiny
		// block, a new block); the slow paths: small one each (their
		// debug.malloc hook's return does not record), tiny two.
		nRecords: 12 + 7 + 2 + 1 + 1 + 2,
		returns: map[string]bool{
			"x": true,
			"mallocgcSmallScanSlowPath(size, typ, needzero, spc, elemsize)":   false,
			"mallocgcSmallNoScanSlowPath(size, typ, needzero, spc, elemsize)": false,
			"mallocgcTinySlowPath(size, typ, needzero)":                       false,
			// The tiny slow path under the runtimesecret experiment.
			"mallocgcSmallNoScanSC2(size, typ, needzero)": false,
		},
	},
}
