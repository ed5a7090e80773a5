// Package report writes what people read of perfspy's results: a run's
// report.md and terminal table, its bench.txt, probe run -bench's
// report.md, bench.txt and terminal lines, probe ab's report.md and
// report.html, and an instructions run's report.md. It reads the JSON
// contracts of package schema and the sites a run found, and nothing of
// how they were measured: probe measures, report writes. Each figure's
// unit and judgement come from package metric (bench.txt's assume=exact
// lines among them), so that a new figure is a row there, a step in
// probe and at most one section here.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
)

func fmtPtr(v *float64, digits int) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", digits, *v)
}

func fmtFloat(v float64, digits int) string { return strconv.FormatFloat(v, 'f', digits, 64) }

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// JSON writes v indented, with a final newline: summary.json, ab.json.
// encoding/json sorts map keys, so the output is deterministic.
func JSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
