package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/metric"
)

// figure is one metric row's value in a summary, as the writers show it.
type figure struct {
	metric.Metric
	name string // written per divisor: "allocs/req", "B/op", "req/s"
	v    float64
	per  string
}

// figures are the rows of metric's table that keep selects, measured per
// divisor in doc (a summary.json, or one benchmark's object, decoded into
// maps), in the table's order; a row the document holds no number for is
// left out. Every writer lists figures through it, so that a new row of
// the table reaches report.md, the terminal and bench.txt unchanged.
func figures(doc any, per string, keep func(metric.Metric) bool) []figure {
	var out []figure
	for _, m := range metric.Table {
		name, ok := m.Written(per)
		if !ok || m.Path(per) == "" || !keep(m) {
			continue
		}
		if v, ok := metric.At(doc, m.Path(per)); ok {
			out = append(out, figure{m, name, v, per})
		}
	}
	return out
}

// labelled keeps the rows that report.md's table of figures and the
// terminal's lines list.
func labelled(m metric.Metric) bool { return m.Label != "" }

// inBench keeps the rows bench.txt carries.
func inBench(m metric.Metric) bool { return m.Bench }

// digits are the figure's decimals: per op two more than per request.
func (f figure) digits() int {
	if f.per == "op" {
		return f.Digits + 2
	}
	return f.Digits
}

// text is the figure's value at its decimals.
func (f figure) text() string { return strconv.FormatFloat(f.v, 'f', f.digits(), 64) }

// windowWords names the window that counted f in doc, with its requests:
// "attribution window, 1200 requests"; a window the run did not open
// apart (copies counted with the allocations) is the attribution window.
func windowWords(doc any, w string) string {
	if w == "" || w == "window" {
		return "timing window"
	}
	n, ok := metric.At(doc, w+".requests")
	if !ok {
		w = "attribution_window"
		n, _ = metric.At(doc, w+".requests")
	}
	return fmt.Sprintf("%s, %.0f requests", strings.ReplaceAll(w, "_", " "), n)
}

// group is the figures of one source key, in the table's order: one
// terminal line.
type group struct {
	key  string
	figs []figure
}

// groups splits figs by their SourceKey, keys in their first figure's
// order.
func groups(figs []figure) []group {
	var out []group
	at := map[string]int{}
	for _, f := range figs {
		i, ok := at[f.SourceKey]
		if !ok {
			i = len(out)
			at[f.SourceKey] = i
			out = append(out, group{key: f.SourceKey})
		}
		out[i].figs = append(out[i].figs, f)
	}
	return out
}

// line is a group's figures on the terminal: "22.02 allocs/req, 17090 B/req".
func (g group) line() string {
	parts := make([]string, len(g.figs))
	for i, f := range g.figs {
		parts[i] = f.text() + " " + f.name
	}
	return strings.Join(parts, ", ")
}

// head is a terminal line's first words, padded to the column of values.
func head(key string) string {
	return fmt.Sprintf("%-13s", strings.ReplaceAll(key, "_", " "))
}
