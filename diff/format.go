package diff

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/perfspy/perfspy/internal/safetext"
)

// Formats allocdiff writes.
var Formats = []string{"text", "markdown", "csv", "json"}

func pct(before, after int64) string {
	if before == 0 {
		if after == 0 {
			return "0%"
		}
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", 100*float64(after-before)/float64(before))
}

func signed(v int64) string {
	if v > 0 {
		return "+" + strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10)
}

func fl(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func flSigned(v float64) string {
	s := fl(v)
	if v > 0 {
		s = "+" + s
	}
	return s
}

// noCountNote says why a table has totals only.
const noCountNote = "(no request or op count: a side's profiles carry no perfspy.requests comment, so these are totals; -per N divides each profile by its N ops)"

func (r *Result) per() string {
	if r.Per == "" {
		return "req"
	}
	return r.Per
}

func (r *Result) countName() string {
	if r.per() == "op" {
		return "ops"
	}
	return "requests"
}

// header and cells are the table's columns, shared by text, markdown and csv.
func (r *Result) header() []string {
	h := []string{"key", "flat before", "flat after", "flat delta", "delta %", "cum before", "cum after", "cum delta"}
	if r.PerRequest {
		h = append(h, "before/"+r.per(), "after/"+r.per(), "delta/"+r.per())
	}
	if r.hasP() {
		h = append(h, "p")
	}
	return h
}

func (r *Result) hasP() bool { return len(r.Rows) > 0 && r.Rows[0].P >= 0 }

func (r *Result) cells(row *Row) []string {
	c := []string{row.Key, strconv.FormatInt(row.FlatBefore, 10), strconv.FormatInt(row.FlatAfter, 10), signed(row.FlatDelta()),
		pct(row.FlatBefore, row.FlatAfter), strconv.FormatInt(row.CumBefore, 10), strconv.FormatInt(row.CumAfter, 10), signed(row.CumDelta())}
	if r.PerRequest {
		c = append(c, fl(row.FlatBeforePR), fl(row.FlatAfterPR), flSigned(row.FlatAfterPR-row.FlatBeforePR))
	}
	if r.hasP() {
		c = append(c, strconv.FormatFloat(row.P, 'f', 3, 64))
	}
	return c
}

// tail rows: the rest (the remainder) and the total, which close the table.
func (r *Result) tail(top int) [][]string {
	n := r.shown(top)
	var out [][]string
	rem := r.Remainder(n)
	pad := func(c []string) []string {
		for len(c) < len(r.header()) {
			c = append(c, "")
		}
		return c
	}
	if n < len(r.Rows) || rem != 0 {
		c := []string{fmt.Sprintf("(remainder: %d more rows)", len(r.Rows)-n), "", "", signed(rem), "", "", "", ""}
		if r.PerRequest {
			c = append(c, "", "", flSigned(float64(r.TotalAfter)/float64(r.ReqAfter)-float64(r.TotalBefore)/float64(r.ReqBefore)-r.shownPR(n)))
		}
		out = append(out, pad(c))
	}
	c := []string{"(total)", strconv.FormatInt(r.TotalBefore, 10), strconv.FormatInt(r.TotalAfter, 10), signed(r.TotalAfter - r.TotalBefore), pct(r.TotalBefore, r.TotalAfter), "", "", ""}
	if r.PerRequest {
		b, a := float64(r.TotalBefore)/float64(r.ReqBefore), float64(r.TotalAfter)/float64(r.ReqAfter)
		c = append(c, fl(b), fl(a), flSigned(a-b))
	}
	return append(out, pad(c))
}

func (r *Result) shown(top int) int {
	if top <= 0 || top > len(r.Rows) {
		return len(r.Rows)
	}
	return top
}

func (r *Result) shownPR(n int) float64 {
	var s float64
	for _, row := range r.Rows[:n] {
		s += row.FlatAfterPR - row.FlatBeforePR
	}
	return s
}

// Write writes the first top rows (all when top <= 0) in format.
func (r *Result) Write(w io.Writer, format string, top int) error {
	n := r.shown(top)
	switch format {
	case "text", "":
		fmt.Fprintf(w, "sample %s (%s)", safetext.Text(r.Sample), safetext.Text(r.Unit))
		if r.PerRequest {
			fmt.Fprintf(w, ", %s before %d after %d", r.countName(), r.ReqBefore, r.ReqAfter)
		}
		fmt.Fprintln(w)
		if !r.PerRequest {
			fmt.Fprintln(w, noCountNote)
		}
		// Numbers align right; the key column is padded to align left.
		rows := [][]string{r.header()}
		for i := range r.Rows[:n] {
			c := r.cells(&r.Rows[i])
			c[0] = safetext.Text(c[0])
			rows = append(rows, c)
		}
		rows = append(rows, r.tail(top)...)
		width := 0
		for _, c := range rows {
			width = max(width, len(c[0]))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, c := range rows {
			c[0] += strings.Repeat(" ", width-len(c[0]))
			fmt.Fprintln(tw, strings.Join(c, "\t")+"\t")
		}
		return tw.Flush()
	case "markdown":
		fmt.Fprintf(w, "**%s** (%s)", safetext.Markdown(r.Sample), safetext.Markdown(r.Unit))
		if r.PerRequest {
			fmt.Fprintf(w, ", %s before %d, after %d", r.countName(), r.ReqBefore, r.ReqAfter)
		}
		fmt.Fprint(w, "\n\n")
		if !r.PerRequest {
			fmt.Fprint(w, noCountNote+"\n\n")
		}
		h := r.header()
		fmt.Fprintf(w, "| %s |\n|---%s|\n", strings.Join(h, " | "), strings.Repeat("|---:", len(h)-1))
		for i := range r.Rows[:n] {
			c := r.cells(&r.Rows[i])
			c[0] = safetext.Code(c[0])
			fmt.Fprintf(w, "| %s |\n", strings.Join(c, " | "))
		}
		for _, c := range r.tail(top) {
			fmt.Fprintf(w, "| %s |\n", strings.Join(c, " | "))
		}
		return nil
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(r.header())
		for i := range r.Rows[:n] {
			c := r.cells(&r.Rows[i])
			c[0] = safetext.CSVField(c[0])
			cw.Write(c)
		}
		for _, c := range r.tail(top) {
			cw.Write(c)
		}
		cw.Flush()
		return cw.Error()
	case "json":
		return r.writeJSON(w, n)
	}
	return fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
}

type jsonRow struct {
	Key         string   `json:"key"`
	Before      int64    `json:"before"`
	After       int64    `json:"after"`
	Delta       int64    `json:"delta"`
	CumBefore   int64    `json:"cum_before"`
	CumAfter    int64    `json:"cum_after"`
	CumDelta    int64    `json:"cum_delta"`
	BeforePerRq *float64 `json:"before_per_request,omitempty"`
	AfterPerRq  *float64 `json:"after_per_request,omitempty"`
	DeltaPerRq  *float64 `json:"delta_per_request,omitempty"`
	P           *float64 `json:"p,omitempty"`
}

type jsonTotal struct {
	Before int64 `json:"before"`
	After  int64 `json:"after"`
	Delta  int64 `json:"delta"`
}

type jsonOut struct {
	Sample     string    `json:"sample"`
	Unit       string    `json:"unit"`
	PerRequest bool      `json:"per_request"`
	Per        string    `json:"per,omitempty"` // "req" or "op", when per_request
	Requests   *[2]int64 `json:"requests,omitempty"`
	Rows       []jsonRow `json:"rows"`
	Total      jsonTotal `json:"total"`
	Remainder  int64     `json:"remainder"`
}

func (r *Result) writeJSON(w io.Writer, n int) error {
	out := jsonOut{Sample: r.Sample, Unit: r.Unit, PerRequest: r.PerRequest, Rows: []jsonRow{},
		Total:     jsonTotal{r.TotalBefore, r.TotalAfter, r.TotalAfter - r.TotalBefore},
		Remainder: r.Remainder(n)}
	if r.PerRequest {
		out.Requests = &[2]int64{r.ReqBefore, r.ReqAfter}
		out.Per = r.per()
	}
	for _, row := range r.Rows[:n] {
		j := jsonRow{Key: row.Key, Before: row.FlatBefore, After: row.FlatAfter, Delta: row.FlatDelta(),
			CumBefore: row.CumBefore, CumAfter: row.CumAfter, CumDelta: row.CumDelta()}
		if r.PerRequest {
			b, a, d := row.FlatBeforePR, row.FlatAfterPR, row.FlatAfterPR-row.FlatBeforePR
			j.BeforePerRq, j.AfterPerRq, j.DeltaPerRq = &b, &a, &d
		}
		if row.P >= 0 {
			p := row.P
			j.P = &p
		}
		out.Rows = append(out.Rows, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
