package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/schema"
)

// billDiffs is how many of the sites where the slowest 1%'s bill differs
// the terminal line names.
const billDiffs = 2

// BillLine is the tail's bill in one line: the slowest 1%'s mean against
// the median group's, and the sites where they differ most ("" without
// bills).
func BillLine(b *schema.Bills) string {
	if b == nil || b.Groups["p99"] == nil {
		return ""
	}
	slow, med := b.Groups["p99"], b.Groups["p50"]
	line := fmt.Sprintf("the slowest 1%% (%d of %d requests billed, %.0f µs against the median's %.0f): %.2f allocs, %.0f B against %.2f, %.0f B",
		slow.Requests, b.Kept, slow.DurationUS, med.DurationUS, slow.Allocs, slow.AllocBytes, med.Allocs, med.AllocBytes)
	var parts []string
	for _, d := range b.Differ[:min(billDiffs, len(b.Differ))] {
		parts = append(parts, fmt.Sprintf("%+.2f allocs (%+.0f B) in %s (%s)", d.Allocs, d.Bytes, d.Func, filepath.Base(d.Site)))
	}
	if slow.Joined > 0 && med.Joined > 0 {
		line += fmt.Sprintf(" (the driver's latency %.0f µs against %.0f)", slow.DriverUS, med.DriverUS)
	}
	if len(parts) == 0 {
		line += "; no site differs"
	} else {
		line += "; " + strings.Join(parts, ", ")
	}
	return line + copiesLine(b) + timeLine(b)
}

// copiesLine is where the slowest 1%'s copies differ most from the
// median's ("" when the bills have no copies, or none differ by a byte).
func copiesLine(b *schema.Bills) string {
	var parts []string
	for _, d := range b.DifferCopies {
		if len(parts) == billDiffs || math.Abs(d.Bytes) < 1 {
			break
		}
		verb := "copied"
		if d.Kind == "memclr" {
			verb = "cleared"
		}
		parts = append(parts, fmt.Sprintf("%+.0f B %s (%+.2f calls) in %s (%s)", d.Bytes, verb, d.Calls, d.Func, filepath.Base(d.Site)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// timeLine is where the slowest 1%'s time went against the median's: the
// two parts that differ most and the syscalls ("" when the bills have no
// time: an older agent).
func timeLine(b *schema.Bills) string {
	var parts []string
	for _, d := range b.DifferTime[:min(billDiffs, len(b.DifferTime))] {
		parts = append(parts, fmt.Sprintf("%+.0f µs %s", d.US, d.Part))
	}
	if math.Abs(b.DifferSyscalls) >= 0.5 {
		parts = append(parts, fmt.Sprintf("%+.1f syscalls%s", b.DifferSyscalls, syscallNames(b.DifferSyscallsByName)))
	}
	if len(b.DifferWaits) > 0 {
		w := b.DifferWaits[0]
		parts = append(parts, fmt.Sprintf("waiting %+.0f µs in %s at %s (%s)", w.US, w.Part, w.Func, filepath.Base(w.Site)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; time " + strings.Join(parts, ", ")
}

// syscallNames is " (+2 sched_yield, -1 write)": the names whose counts
// differ by half a call or more, largest first ("" when none).
func syscallNames(d map[string]float64) string {
	var names []string
	for n, v := range d {
		if math.Abs(v) >= 0.5 {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(math.Abs(d[b]), math.Abs(d[a])), cmp.Compare(a, b)) })
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf("%+.1f %s", d[n], n))
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, ", ") + ")"
}

// driverCell is a bill's joined driver latency, or "-" when none joined.
func driverCell(b *schema.Bill) string {
	if b.Joined == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", b.DriverUS)
}

// partsCells are a bill's time parts as table cells, in wire.BillParts'
// order, and the largest of its own waits (not CPU).
func partsCells(b *schema.Bill) (cells, wait string) {
	var c []string
	best := 0.0
	for _, p := range wire.BillParts {
		v := b.TimeUS[p]
		c = append(c, fmt.Sprintf("%.1f", v))
		if p != "cpu" && v > best {
			best, wait = v, fmt.Sprintf("%s %.0f µs", p, v)
		}
	}
	return strings.Join(c, " | "), wait
}

// writeBills is report.md's section of the requests' own bills.
func writeBills(w io.Writer, s *schema.Summary) {
	b := s.Bills
	if b == nil || b.Groups["p99"] == nil {
		return
	}
	slow, med := b.Groups["p99"], b.Groups["p50"]
	fmt.Fprintf(w, "\n## The slowest requests' own bill (attribution window, %s)\n\n", b.Source)
	what := "allocations"
	if slow.Copies != nil {
		what = "allocations and copies"
	}
	fmt.Fprintf(w, "Each request billed carries its own %s by site (%d bills of the %d requests that began, one in %d at random; %d still open at the end, left out). A bill runs from the handler's start to the response's end: the request's reading and parsing before it (`(before routing)`) is on no bill. Ranked by that duration: the slowest 1%% and as many around the median, means per request. `tail_allocs.pb.gz` and `median_allocs.pb.gz` are the two groups' profiles (`allocdiff median_allocs.pb.gz tail_allocs.pb.gz`).\n\n",
		what, b.Kept, b.Began, b.Every, b.Open)
	fmt.Fprintf(w, "| group | requests | duration µs | the driver's latency µs | allocs | bytes asked for | outside the bill's sites |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range []struct {
		name string
		b    *schema.Bill
	}{{"median", med}, {"slowest 1%", slow}} {
		fmt.Fprintf(w, "| %s | %d | %.1f | %s | %.2f | %.0f | %.2f |\n", g.name, g.b.Requests, g.b.DurationUS, driverCell(g.b), g.b.Allocs, g.b.AllocBytes, g.b.RemainderAllocs)
	}
	if b.TailOverlap != nil {
		fmt.Fprintf(w, "\n%d bills are joined to the load driver's latency for their request (from its send to its response's end, as the driver saw it); of the slowest 1%% by that latency, %.0f%% are among the slowest 1%% by server-side duration.\n", b.Joined, 100**b.TailOverlap)
	}
	fmt.Fprintf(w, "\nTheir time by part, µs per request: `cpu` on every goroutine the request ran on, the rest its own goroutine's time by state (runnable = `sched`, in a syscall, waiting and why); syscalls those its goroutines entered.\n\n| group | %s | syscalls |\n|---|%s---:|\n",
		strings.Join(wire.BillParts, " | "), strings.Repeat("---:|", len(wire.BillParts)))
	for _, g := range []struct {
		name string
		b    *schema.Bill
	}{{"median", med}, {"slowest 1%", slow}} {
		cells, _ := partsCells(g.b)
		fmt.Fprintf(w, "| %s | %s | %.2f |\n", g.name, cells, g.b.Syscalls)
	}
	if t := timeLine(b); t != "" {
		fmt.Fprintf(w, "\nThe slowest 1%%'s %s (their mean minus the median's).\n", strings.TrimPrefix(t, "; "))
	}
	if len(b.DifferWaits) > 0 {
		fmt.Fprintf(w, "\nWhere the slowest 1%% waited differently (their own goroutine's waits by place, their mean minus the median's, µs per request):\n\n| µs | part | function | site |\n|---:|---|---|---|\n")
		for _, d := range b.DifferWaits[:min(10, len(b.DifferWaits))] {
			fmt.Fprintf(w, "| %+.1f | %s | %s | %s |\n", d.US, d.Part, safetext.Markdown(d.Func), safetext.Code(filepath.Base(d.Site)))
		}
	}
	if len(b.Differ) > 0 {
		fmt.Fprintf(w, "\nWhere the slowest 1%% differ (their mean minus the median's, per request):\n\n| allocs | bytes | function | site |\n|---:|---:|---|---|\n")
		for _, d := range b.Differ[:min(10, len(b.Differ))] {
			fmt.Fprintf(w, "| %+.2f | %+.0f | %s | %s |\n", d.Allocs, d.Bytes, safetext.Markdown(d.Func), safetext.Code(filepath.Base(d.Site)))
		}
	}
	writeBillCopies(w, b)
	fmt.Fprintf(w, "\nThe slowest requests, each its own bill:\n\n| duration µs | the driver's µs | route | allocs | bytes | largest site | cpu µs | longest wait | syscalls |\n|---:|---:|---|---:|---:|---|---:|---|---:|\n")
	for _, e := range b.Exemplars {
		top := ""
		if len(e.Sites) > 0 {
			top = fmt.Sprintf("%s (%.0f)", safetext.Markdown(e.Sites[0].Func), e.Sites[0].Allocs)
		}
		_, wait := partsCells(&e)
		if len(e.Waits) > 0 {
			wait = fmt.Sprintf("%s %.0f µs in %s (%s)", e.Waits[0].Part, e.Waits[0].US, safetext.Markdown(e.Waits[0].Func), filepath.Base(e.Waits[0].Site))
		}
		fmt.Fprintf(w, "| %.1f | %s | %s | %.0f | %.0f | %s | %.1f | %s | %.0f |\n", e.DurationUS, driverCell(&e), safetext.Markdown(e.Route), e.Allocs, e.AllocBytes, top, e.TimeUS["cpu"], wait, e.Syscalls)
	}
}

// writeBillCopies is report.md's table of the groups' copies and the
// lines where they differ (nothing when the window counted no copies).
func writeBillCopies(w io.Writer, b *schema.Bills) {
	slow, med := b.Groups["p99"], b.Groups["p50"]
	if slow.Copies == nil || med.Copies == nil {
		return
	}
	fmt.Fprintf(w, "\nTheir copies (copyspy's recorder, on each request's bill), per request; `tail_copies.pb.gz` and `median_copies.pb.gz` are the two groups' profiles:\n\n| group | copy calls | copied bytes | clear calls | cleared bytes | outside the bill's sites (calls) |\n|---|---:|---:|---:|---:|---:|\n")
	for _, g := range []struct {
		name string
		c    *schema.BillCopies
	}{{"median", med.Copies}, {"slowest 1%", slow.Copies}} {
		fmt.Fprintf(w, "| %s | %.2f | %.0f | %.2f | %.0f | %.2f |\n", g.name, g.c.CopyCalls, g.c.CopiedBytes, g.c.ClearCalls, g.c.ClearedBytes, g.c.RemainderCopyCalls+g.c.RemainderClearCalls)
	}
	if len(b.DifferCopies) == 0 {
		return
	}
	fmt.Fprintf(w, "\nWhere the slowest 1%%'s copies differ (their mean minus the median's, per request):\n\n| bytes | calls | kind | function | via | site |\n|---:|---:|---|---|---|---|\n")
	for _, d := range b.DifferCopies[:min(10, len(b.DifferCopies))] {
		fmt.Fprintf(w, "| %+.0f | %+.2f | %s | %s | %s | %s |\n", d.Bytes, d.Calls, d.Kind, safetext.Markdown(d.Func), safetext.Markdown(d.Via), safetext.Code(filepath.Base(d.Site)))
	}
}

// TailMoves says where the slowest 1%'s time went between two builds, by
// their own bills (ab.json's tail): the duration's change and the parts
// that moved with it ("" when the duration did not move, or was not
// compared). Parts are named only when significant on their own (p <
// 0.05 and 2%, as timings are judged) and a microsecond or more.
func TailMoves(tail map[string]*schema.ABMetric) string {
	d := tail["duration"]
	if d == nil || (d.Verdict != "regression" && d.Verdict != "improvement") {
		return ""
	}
	line := fmt.Sprintf("the slowest 1%%'s own bills: %+.0f µs a request (%.0f → %.0f, p %.3f)", d.Delta, d.Before, d.After, d.P)
	var parts []string
	for _, p := range wire.BillParts {
		x := tail[p]
		if x != nil && (x.Verdict == "regression" || x.Verdict == "improvement") && math.Abs(x.Delta) >= 1 {
			parts = append(parts, fmt.Sprintf("%+.0f µs %s", x.Delta, p))
		}
	}
	// The places the tail's own goroutine waited that moved, the two
	// largest (keys "wait PART FUNC SITE", ab's order: sorted).
	var places []string
	for k, x := range tail {
		if !strings.HasPrefix(k, "wait ") || x == nil || (x.Verdict != "regression" && x.Verdict != "improvement") || math.Abs(x.Delta) < 1 {
			continue
		}
		places = append(places, k)
	}
	slices.SortFunc(places, func(a, b string) int {
		return cmp.Or(cmp.Compare(math.Abs(tail[b].Delta), math.Abs(tail[a].Delta)), cmp.Compare(a, b))
	})
	for _, k := range places[:min(2, len(places))] {
		// part, function, then the site, which may hold spaces
		if f := strings.SplitN(strings.TrimPrefix(k, "wait "), " ", 3); len(f) == 3 {
			parts = append(parts, fmt.Sprintf("%+.0f µs waiting in %s at %s (%s)", tail[k].Delta, f[0], f[1], filepath.Base(f[2])))
		}
	}
	if len(parts) == 0 {
		return line + "; no part moved on its own"
	}
	return line + ": " + strings.Join(parts, ", ")
}

// writeTailTable is ab's report.md section of the slowest 1%'s own bills,
// part by part.
func writeTailTable(w io.Writer, tail map[string]*schema.ABMetric) {
	if tail == nil {
		return
	}
	fmt.Fprintf(w, "\n## The slowest 1%% of requests, by their own bills (µs per request, docs/bills.md)\n\n")
	if line := TailMoves(tail); line != "" {
		fmt.Fprintf(w, "%s.\n\n", strings.ToUpper(line[:1])+line[1:])
	}
	fmt.Fprint(w, "| part | before | after | delta | p | moved |\n|---|---:|---:|---:|---:|---|\n")
	for _, p := range append([]string{"duration"}, wire.BillParts...) {
		if x := tail[p]; x != nil {
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %+.1f | %.3f | %s |\n", p, x.Before, x.After, x.Delta, x.P, x.Verdict)
		}
	}
}
