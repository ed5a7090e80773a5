package review

import (
	"strings"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestOnceSection: a bump that moves a type cache from package init to
// the first call (go-json's 12 KB → 159 KB at startup, 28 KB → 102 KB at
// the first op by MemStats) is shown beside the figures per op, with the
// site that moved; a benchmark whose paid-once amounts stayed is not.
func TestOnceSection(t *testing.T) {
	r := &Result{}
	r.Items = []*schema.ReviewItem{{Kind: "benchmarks", Name: "./codec .", Once: map[string]*schema.ABOnce{
		"BenchmarkDecode-2": {
			Before: &schema.BenchOnce{StartupAllocs: 120, StartupBytes: 12 << 10, FirstAllocs: 300, FirstBytes: 28 << 10, Sites: []schema.OnceSite{{Func: "example.com/json.compile", Allocs: 300, Bytes: 28 << 10}}},
			After:  &schema.BenchOnce{StartupAllocs: 900, StartupBytes: 159 << 10, FirstAllocs: 1100, FirstBytes: 102 << 10, Sites: []schema.OnceSite{{Func: "example.com/json.compile", Allocs: 1100, Bytes: 102 << 10}}},
		},
		"BenchmarkSame-2": {
			Before: &schema.BenchOnce{StartupAllocs: 120, StartupBytes: 12 << 10, FirstBytes: 100},
			After:  &schema.BenchOnce{StartupAllocs: 121, StartupBytes: 12<<10 + 64, FirstBytes: 90},
		},
	}}}
	md := r.onceSection()
	for _, want := range []string{"**Paid once**", "| BenchmarkDecode-2 | its process before its first run (package init, TestMain) | 12288 B (120 allocs) | 162816 B (900 allocs) | +150528 B (+780 allocs) |",
		"| BenchmarkDecode-2 | its first op, beyond a steady one", "+75776 B", "`example.com/json.compile` +75776 B"} {
		if !strings.Contains(md, want) {
			t.Errorf("review.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "BenchmarkSame") {
		t.Errorf("a benchmark whose paid-once amounts stayed is shown:\n%s", md)
	}
	r.Items[0].Once = map[string]*schema.ABOnce{"BenchmarkSame-2": r.Items[0].Once["BenchmarkSame-2"]}
	if md := r.onceSection(); md != "" {
		t.Errorf("nothing moved, yet:\n%s", md)
	}
}
