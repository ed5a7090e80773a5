package report

import (
	"strings"
	"testing"

	"github.com/perfspy/perfspy/schema"
)

// TestTailMoves: a tail that moved names the parts that moved with it, and
// only those; a tail that did not move says nothing, whatever its parts
// did (nine parts compared would raise false alarms of their own).
func TestTailMoves(t *testing.T) {
	m := func(before, after float64, verdict string) *schema.ABMetric {
		return &schema.ABMetric{Before: before, After: after, Delta: after - before, P: 0.008, Verdict: verdict}
	}
	tail := map[string]*schema.ABMetric{
		"duration": m(100, 2100, "regression"),
		"cpu":      m(40, 41, "no change"),
		"sync":     m(10, 1910, "regression"),
		"sleep":    m(0, 0.4, "regression"), // under a microsecond
		"sched":    m(50, 149, "regression"),
		"wait sync sync.(*Mutex).Lock /src/my app/cache.go:88": m(5, 1805, "regression"),
		"wait sync main.other /src/main.go:9":                  m(5, 5.5, "regression"),
		"wait net net.(*netFD).Read /src/main.go:20":           m(5, 600, "no change"),
	}
	got := TailMoves(tail)
	want := "the slowest 1%'s own bills: +2000 µs a request (100 → 2100, p 0.008): +1900 µs sync, +99 µs sched, +1800 µs waiting in sync at sync.(*Mutex).Lock (cache.go:88)"
	if got != want {
		t.Errorf("TailMoves:\n got %s\nwant %s", got, want)
	}
	tail["duration"] = m(100, 101, "no change")
	if got := TailMoves(tail); got != "" {
		t.Errorf("a tail that did not move: %q", got)
	}
	if got := TailMoves(nil); got != "" {
		t.Errorf("no tail: %q", got)
	}
	var b strings.Builder
	tail["duration"] = m(100, 2100, "regression")
	writeTailTable(&b, tail)
	if !strings.Contains(b.String(), "| sync | 10.0 | 1910.0 | +1900.0 | 0.008 | regression |") || !strings.Contains(b.String(), "The slowest 1%'s own bills: +2000") {
		t.Errorf("ab's tail table:\n%s", b.String())
	}
}

// TestBillLine: the terminal's tail bill names the sites where the
// slowest 1% allocate and copy more, and where their time went; report.md
// gives the copies' table, and neither says a word of copies when the
// window counted none.
// TestBillScope: the terminal's tail bill says that the work before
// routing, in the per-request totals, is on no bill.
func TestBillScope(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	s := &schema.Summary{Target: "t", Verdict: "server-bound", PerRequest: schema.PerRequest{Allocs: f(23.03)},
		Bills: &schema.Bills{Source: schema.SourceBills, Kept: 300, Groups: map[string]*schema.Bill{
			"p99": {Requests: 3, DurationUS: 900, Allocs: 10, AllocBytes: 900}, "p50": {Requests: 3, DurationUS: 100, Allocs: 10, AllocBytes: 900}}},
		RoutesBeforeRouting: &schema.RouteSummary{Route: "(before routing)", AllocsPerReq: f(13), AllocBytesPerReq: f(1400)}}
	var out strings.Builder
	(&Run{Summary: s}).Terminal(&out)
	want := "10.00 allocs, 900 B against 10.00, 900 B; no site differs (a bill runs from the handler's start: the 13.00 allocs, 1400 B a request spends before routing are in the per-request totals, on no bill)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("the terminal's tail bill lacks %q:\n%s", want, out.String())
	}
}

func TestBillLine(t *testing.T) {
	group := func(n int, us, copied float64) *schema.Bill {
		return &schema.Bill{Requests: n, DurationUS: us, Allocs: 3, AllocBytes: 48, TimeUS: map[string]float64{"cpu": 10},
			Copies: &schema.BillCopies{CopyCalls: 2, CopiedBytes: copied, Sites: []schema.BillCopySite{}}}
	}
	b := &schema.Bills{Source: schema.SourceBills, Kept: 300, Began: 900, Every: 3,
		Groups: map[string]*schema.Bill{"p99": group(3, 5070, 65636), "p50": group(3, 14, 100)},
		Differ: []schema.BillDiff{{Func: "main.rareFill", Site: "/src/main.go:212", Allocs: 10, Bytes: 10240}},
		DifferCopies: []schema.BillCopySite{
			{Func: "main.rareCopy", Site: "/src/main.go:223", Via: "main.rareCopy", Kind: "memmove", Calls: 1, Bytes: 65536},
			{Func: "main.rareFill", Site: "/src/main.go:212", Via: "runtime.mallocgc", Kind: "memclr", Calls: 7.5, Bytes: 7680},
			{Func: "main.third", Site: "/src/main.go:9", Kind: "memmove", Calls: 1, Bytes: 8}},
		DifferTime: []schema.BillPartDiff{{Part: "sync", US: 5000}}}
	line := BillLine(b)
	for _, want := range []string{"+10.00 allocs (+10240 B) in main.rareFill (main.go:212)",
		"+65536 B copied (+1.00 calls) in main.rareCopy (main.go:223), +7680 B cleared (+7.50 calls) in main.rareFill (main.go:212)",
		"; time +5000 µs sync"} {
		if !strings.Contains(line, want) {
			t.Errorf("tail bill line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "main.third") {
		t.Errorf("the line names a third copy site:\n%s", line)
	}
	var md strings.Builder
	writeBills(&md, &schema.Summary{Bills: b})
	if !strings.Contains(md.String(), "| slowest 1% | 2.00 | 65636 | 0.00 | 0 | 0.00 |") || !strings.Contains(md.String(), "| +65536 | +1.00 | memmove | main.rareCopy | main.rareCopy | `main.go:223` |") {
		t.Errorf("report.md's copies:\n%s", md.String())
	}
	// No copies counted: not a word of them.
	b.DifferCopies = nil
	for _, g := range b.Groups {
		g.Copies = nil
	}
	md.Reset()
	writeBills(&md, &schema.Summary{Bills: b})
	if line := BillLine(b); strings.Contains(line, "copied") || strings.Contains(md.String(), "copies") {
		t.Errorf("copies without a copy window:\n%s\n%s", line, md.String())
	}
}
