// Package copybench copies structs by value, which the compiler does
// itself (memmove never sees it): a 176-byte row sixteen times an op
// (16-byte vector moves), a 2400-byte block twice (REP; MOVSQ); and a
// slice's copy, which memmove makes (copyspy's, not the compiler's).
package copybench

type row struct{ a [22]int64 }

type block struct{ a [300]int64 }

var (
	rows   = make([]row, 16)
	kept   row
	blocks = make([]block, 2)
	outs   = make([]block, 2)
	n      int
	src    = make([]byte, 256)
	dst    = make([]byte, 256)
)

//go:noinline
func copySlice() {
	copy(dst, src)
}

//go:noinline
func copyRows() {
	for i := range rows {
		kept = rows[i]
	}
}

//go:noinline
func copyBlocks() {
	for i := range blocks {
		outs[i] = blocks[i]
	}
}

//go:noinline
func count() {
	n += len(rows)
}
