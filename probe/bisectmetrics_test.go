package probe

import (
	"maps"
	"math"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestBisectMetrics: the counts bisect follows come from metric's table,
// and are the six it followed when they were spelled out by hand; a
// benchmark's figure is read at the table's path.
func TestBisectMetrics(t *testing.T) {
	want := map[string]string{"allocs/req": "allocs", "B/req": "allocs", "copied-B/req": "copies", "allocs/op": "allocs", "B/op": "allocs", "copied-B/op": "copies"}
	if !maps.Equal(bisectMetrics, want) {
		t.Errorf("bisect follows %v, want %v", bisectMetrics, want)
	}
	p := schema.BenchPerOp{Allocs: 2, AllocBytes: 48}
	if a, b, c := benchFigure(p, "allocs/op"), benchFigure(p, "B/op"), benchFigure(p, "copied-B/op"); a != 2 || b != 48 || !math.IsNaN(c) {
		t.Errorf("allocs/op %v, B/op %v, copied-B/op %v (not measured)", a, b, c)
	}
}
