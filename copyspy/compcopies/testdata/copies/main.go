// Command copies copies structs by value, as the compiler copies them
// itself: a 176-byte row (vector moves) and a 2400-byte block (REP;
// MOVSQ).
package main

type row struct{ a [22]int64 }

type block struct{ a [300]int64 }

var (
	rows   = make([]row, 4)
	kept   row
	blocks = make([]block, 2)
	out    = make([]block, 2)
)

//go:noinline
func copyRow(i int) {
	kept = rows[i]
}

//go:noinline
func copyBlocks() {
	for i := range blocks {
		out[i] = blocks[i]
	}
}

func main() {
	copyRow(1)
	copyBlocks()
}
