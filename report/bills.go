package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

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
	if len(parts) == 0 {
		return line + "; no site differs"
	}
	return line + "; " + strings.Join(parts, ", ")
}

// writeBills is report.md's section of the requests' own bills.
func writeBills(w io.Writer, s *schema.Summary) {
	b := s.Bills
	if b == nil || b.Groups["p99"] == nil {
		return
	}
	slow, med := b.Groups["p99"], b.Groups["p50"]
	fmt.Fprintf(w, "\n## The slowest requests' own bill (attribution window, %s)\n\n", b.Source)
	fmt.Fprintf(w, "Each request billed carries its own allocations by site (%d bills of the %d requests that began, one in %d at random; %d still open at the end, left out). A bill runs from the handler's start to the response's end: the request's reading and parsing before it (`(before routing)`) is on no bill. Ranked by that duration: the slowest 1%% and as many around the median, means per request. `tail_allocs.pb.gz` and `median_allocs.pb.gz` are the two groups' profiles (`allocdiff median_allocs.pb.gz tail_allocs.pb.gz`).\n\n",
		b.Kept, b.Began, b.Every, b.Open)
	fmt.Fprintf(w, "| group | requests | duration µs | allocs | bytes asked for | outside the bill's sites |\n|---|---:|---:|---:|---:|---:|\n")
	for _, g := range []struct {
		name string
		b    *schema.Bill
	}{{"median", med}, {"slowest 1%", slow}} {
		fmt.Fprintf(w, "| %s | %d | %.1f | %.2f | %.0f | %.2f |\n", g.name, g.b.Requests, g.b.DurationUS, g.b.Allocs, g.b.AllocBytes, g.b.RemainderAllocs)
	}
	if len(b.Differ) > 0 {
		fmt.Fprintf(w, "\nWhere the slowest 1%% differ (their mean minus the median's, per request):\n\n| allocs | bytes | function | site |\n|---:|---:|---|---|\n")
		for _, d := range b.Differ[:min(10, len(b.Differ))] {
			fmt.Fprintf(w, "| %+.2f | %+.0f | %s | %s |\n", d.Allocs, d.Bytes, safetext.Markdown(d.Func), safetext.Code(filepath.Base(d.Site)))
		}
	}
	fmt.Fprintf(w, "\nThe slowest requests, each its own bill:\n\n| duration µs | route | allocs | bytes | largest site |\n|---:|---|---:|---:|---|\n")
	for _, e := range b.Exemplars {
		top := ""
		if len(e.Sites) > 0 {
			top = fmt.Sprintf("%s (%.0f)", safetext.Markdown(e.Sites[0].Func), e.Sites[0].Allocs)
		}
		fmt.Fprintf(w, "| %.1f | %s | %.0f | %.0f | %s |\n", e.DurationUS, safetext.Markdown(e.Route), e.Allocs, e.AllocBytes, top)
	}
}
