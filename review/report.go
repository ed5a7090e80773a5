package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/internal/outfile"
	"github.com/perfspy/perfspy/internal/safetext"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
)

// CommentMarker opens review.md: the action updates the comment that
// starts with it instead of adding one per push.
const CommentMarker = "<!-- perfspy-review -->"

// CommentLimit is the size review.md stays within: GitHub refuses a
// comment over 65536 characters; the rest is left for a note.
const CommentLimit = 60000

// ErrWrite is a review whose results could not be written (a full disk):
// it is measured, but there is nothing to read.
var ErrWrite = errors.New("writing the results")

// write writes review.md, review.json and annotations.txt, and appends
// review.md to $GITHUB_STEP_SUMMARY when it is set.
func (r *Result) write(getenv func(string) string) error {
	md := r.Markdown(CommentLimit)
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	var ann strings.Builder
	for _, a := range r.Annotations {
		ann.WriteString(workflowCommand(a) + "\n")
	}
	cq, err := codeQuality(r.Annotations)
	if err != nil {
		return err
	}
	// Each file whole or not at all (a full disk leaves no empty
	// review.md), review.md last: its presence says the others are there.
	for _, f := range []struct {
		name string
		data []byte
	}{{"review.json", append(js, '\n')}, {"annotations.txt", []byte(ann.String())}, {"codequality.json", cq}, {"review.md", []byte(md)}} {
		if err := outfile.Write(filepath.Join(r.Dir, f.name), f.data, 0o644); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrWrite, f.name, err)
		}
	}
	if p := getenv("GITHUB_STEP_SUMMARY"); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
		}
		_, err = f.WriteString(md + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
		}
	}
	return nil
}

// Markdown is review.md, at most limit bytes: the verdict, a line per
// changed figure, each change's functions and annotated lines, then the
// rest folded. Sections that do not fit are left out whole, with a note.
func (r *Result) Markdown(limit int) string {
	var head strings.Builder
	// The marker by which the GitHub action finds its comment to update.
	head.WriteString(CommentMarker + "\n")
	changed := r.changed()
	title := map[string]string{"pass": "pass", "fail": "FAIL", "incomplete": "INCOMPLETE", "not judged": "not judged"}[r.Verdict]
	switch {
	case r.Verdict == "fail":
		fmt.Fprintf(&head, "## perfspy review: %s, %d gate(s) failed\n\n", title, len(r.GateFailed))
	case len(changed) == 0:
		fmt.Fprintf(&head, "## perfspy review: %s, no figure changed\n\n", title)
	default:
		fmt.Fprintf(&head, "## perfspy review: %s, %d figure(s) changed within their gates\n\n", title, len(changed))
	}
	goOf := func(side map[string]string) string {
		if g := side["go"]; g != "" {
			return ", " + safetext.Markdown(g)
		}
		return ""
	}
	fmt.Fprintf(&head, "base %s (%s%s) → head %s (%s%s). Counts are exact and gate on any change past their allowed growth; timings are judged with significance.\n\n",
		safetext.Code(short(r.Base["commit"])), safetext.Markdown(r.Base["rev"]), goOf(r.Base), safetext.Code(short(r.Head["commit"])), safetext.Markdown(r.Head["rev"]), goOf(r.Head))
	if len(changed) > 0 {
		head.WriteString("| | figure | before | after | change | verdict |\n|---|---|---:|---:|---:|---|\n")
		for _, ch := range changed {
			head.WriteString(changeRow(ch.item, ch.c))
		}
		head.WriteString("\n")
	}
	head.WriteString(r.moduleSection())
	head.WriteString(r.onceSection())
	head.WriteString(r.bisectHints())
	for _, why := range r.Reasons {
		if strings.Contains(why, " could not be measured: ") {
			fmt.Fprintf(&head, "- ❌ %s\n", safetext.Markdown(why))
			continue
		}
		fmt.Fprintf(&head, "- not judged: %s\n", safetext.Markdown(why))
	}
	if len(r.Reasons) > 0 {
		head.WriteString("\n")
	}
	var sections []string
	done := map[string]bool{}
	for _, ch := range changed {
		k := ch.item.Name + "\x00" + ch.c.Subject
		if done[k] {
			continue
		}
		done[k] = true
		var same []schema.ReviewChange
		for _, o := range changed {
			if o.item == ch.item && o.c.Subject == ch.c.Subject {
				same = append(same, o.c)
			}
		}
		sections = append(sections, r.changeSection(ch.item, same))
	}
	sections = append(sections, r.details())
	out := head.String()
	left := 0
	for i, s := range sections {
		note := ""
		if rest := len(sections) - i - 1; rest > 0 {
			note = fmt.Sprintf("\n_%d more section(s) left out to stay under GitHub's comment size: see review.json and the results folder._\n", rest+1)
		}
		if len(out)+len(s)+len(note) > limit {
			left = len(sections) - i
			break
		}
		out += s
	}
	if left > 0 {
		out += fmt.Sprintf("\n_%d section(s) left out to stay under GitHub's comment size: see review.json and the results folder._\n", left)
	}
	if len(out) > limit { // the head alone is too long: cut at a line
		cut := strings.LastIndex(out[:limit-200], "\n")
		out = out[:cut+1] + "\n_cut to stay under GitHub's comment size: see review.json._\n"
	}
	return out
}

type itemChange struct {
	item *schema.ReviewItem
	c    schema.ReviewChange
}

// changed lists the figures that changed (a regression or an
// improvement), failed gates first.
func (r *Result) changed() []itemChange {
	var out []itemChange
	for _, it := range r.Items {
		for _, c := range it.Changes {
			if c.Verdict == "regression" || c.Verdict == "improvement" {
				out = append(out, itemChange{it, c})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b itemChange) int {
		if a.c.Failed != b.c.Failed {
			if a.c.Failed {
				return -1
			}
			return 1
		}
		return 0
	})
	return out
}

func what(it *schema.ReviewItem, c schema.ReviewChange) string {
	s := it.Kind + " " + it.Name
	if c.Subject != "" && c.Subject != it.Name {
		s += ", " + c.Subject
	}
	return s
}

func changeRow(it *schema.ReviewItem, c schema.ReviewChange) string {
	verdict := c.Verdict
	switch {
	case c.Failed:
		verdict = fmt.Sprintf("❌ %s, past its gate of %g%%", c.Verdict, *c.Gate)
	case c.Gate != nil && c.Verdict == "regression":
		verdict = fmt.Sprintf("⚠️ %s, within its gate of %g%%", c.Verdict, *c.Gate)
	case c.Verdict == "improvement":
		verdict = "✅ improvement"
	}
	if c.Why != "" {
		verdict += ": " + safetext.Markdown(c.Why)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s (%+.1f%%) | %s |\n", safetext.Markdown(what(it, c)), safetext.Markdown(c.Metric),
		fig(c.Before), fig(c.After), signed(c.Delta), c.DeltaPct, verdict)
}

func fig(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.4g", v)
}

func signed(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%+.4g", v)
}

// changeSection explains the changes of one route or benchmark: the
// functions whose share moved in each profile behind them (probe ab's
// table, top rows, per request or op) and the lines annotated.
func (r *Result) changeSection(it *schema.ReviewItem, cs []schema.ReviewChange) string {
	var b strings.Builder
	c := cs[0]
	var figs []string
	for _, x := range cs {
		figs = append(figs, safetext.Markdown(x.Metric)+" "+signed(x.Delta))
	}
	fmt.Fprintf(&b, "### %s: %s\n\n", safetext.Markdown(what(it, c)), strings.Join(figs, ", "))
	profiles := map[string]bool{}
	for _, x := range cs {
		if x.Profile == "" || profiles[x.Profile] {
			continue
		}
		profiles[x.Profile] = true
		var rows []string
		for _, f := range it.Functions {
			if f.Profile == x.Profile && len(rows) < 8 {
				rows = append(rows, fmt.Sprintf("| %s | %.4g | %.4g | %+.4g |\n", safetext.Code(f.Key), f.Before, f.After, f.Delta))
			}
		}
		if len(rows) == 0 {
			fmt.Fprintf(&b, "%s: no function's share moved by a hundredth or more.\n\n", safetext.Markdown(x.Profile))
			continue
		}
		unit := it.Functions[slices.IndexFunc(it.Functions, func(f schema.ABFunction) bool { return f.Profile == x.Profile })].Sample
		fmt.Fprintf(&b, "| function (%s, %s) | before | after | change |\n|---|---:|---:|---:|\n", safetext.Markdown(x.Profile), safetext.Markdown(unit))
		b.WriteString(strings.Join(rows, ""))
		b.WriteString("\n")
	}
	writeTailBills(&b, it.Functions)
	if line := report.TailMoves(it.Tail); line != "" {
		fmt.Fprintf(&b, "The tail's time: %s.\n\n", line)
	}
	var graphs []string
	for _, x := range cs {
		if x.Flame != "" && !slices.Contains(graphs, safetext.Code(x.Flame)) {
			graphs = append(graphs, safetext.Code(x.Flame))
		}
	}
	if len(graphs) > 0 {
		fmt.Fprintf(&b, "Differential flame graphs (head against base, the results folder): %s.\n\n", strings.Join(graphs, ", "))
	}
	n := 0
	var paths strings.Builder
	for _, a := range r.Annotations {
		if a.Item == it.Name && a.Subject == c.Subject {
			if n == 0 {
				b.WriteString("Lines (head):\n\n")
			}
			if n < 10 {
				fmt.Fprintf(&b, "- %s %s: %s\n", safetext.Code(fmt.Sprintf("%s:%d", a.File, a.Line)), safetext.Code(a.Func), safetext.Markdown(a.Message))
				writePath(&paths, a)
			}
			n++
		}
	}
	if n > 10 {
		fmt.Fprintf(&b, "- and %d more (annotations.txt)\n", n-10)
	}
	if n > 0 {
		b.WriteString("\n")
	}
	if paths.Len() > 0 {
		fmt.Fprintf(&b, "<details><summary>The path to each line, from the handler or benchmark</summary>\n\n```text\n%s```\n\n</details>\n\n", paths.String())
	}
	return b.String()
}

// writePath writes an annotation's stack, outermost first, indented by
// depth, as text in a fenced block (no fence can be closed from inside).
func writePath(w *strings.Builder, a schema.Annotation) {
	if len(a.Stack) == 0 {
		return
	}
	clean := func(s string) string { return strings.ReplaceAll(safetext.Text(s), "`", "'") }
	fmt.Fprintf(w, "%s:%d, %s\n", clean(a.File), a.Line, clean(a.Subject))
	for i, f := range a.Stack {
		fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", i+1), clean(f))
	}
}

// details is the folded rest: every figure of every item, and the
// configuration.
func (r *Result) details() string {
	var b strings.Builder
	b.WriteString("<details><summary>Everything measured</summary>\n\n")
	b.WriteString("| | figure | before | after | change | verdict |\n|---|---|---:|---:|---:|---|\n")
	for _, it := range r.Items {
		for _, c := range it.Changes {
			b.WriteString(changeRow(it, c))
		}
	}
	b.WriteString("\nResults folders: ")
	sep := ""
	for _, it := range r.Items {
		if it.Dir == "" {
			continue // new in the head: nothing measured
		}
		b.WriteString(sep + safetext.Code(it.Dir))
		sep = ", "
	}
	fmt.Fprintf(&b, ".\n\nConfiguration: %s", safetext.Code(r.Config))
	if r.cfg != nil {
		gates := sortedKeys(r.cfg.Gates)
		if len(gates) > 0 {
			b.WriteString("; gates: ")
			for i, g := range gates {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s %g%%", safetext.Markdown(g), r.cfg.Gates[g])
			}
		}
		b.WriteString("; a count not named is gated at 0%")
	}
	b.WriteString(".\n\n</details>\n")
	return b.String()
}

// writeTailBills adds what the slowest 1% of requests did differently in
// the head, by their own bills (probe ab's tail_allocs and tail_copies
// rows: allocations and copied bytes per request of that group), when a
// function moved by half an allocation or a byte or more.
func writeTailBills(b *strings.Builder, fns []schema.ABFunction) {
	for _, t := range []struct {
		profile, what, format string
		least                 float64
	}{{"tail_allocs", "allocations", "| %s | %.4g | %.4g | %+.4g |\n", 0.5}, {"tail_copies", "bytes copied", "| %s | %.0f | %.0f | %+.0f |\n", 1}} {
		var rows []string
		for _, f := range fns {
			if f.Profile == t.profile && math.Abs(f.Delta) >= t.least && len(rows) < 5 {
				rows = append(rows, fmt.Sprintf(t.format, safetext.Code(f.Key), f.Before, f.After, f.Delta))
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(b, "The slowest 1%% of requests, by their own bills (%s per request of that group, docs/bills.md):\n\n| function | before | after | change |\n|---|---:|---:|---:|\n", t.what)
		b.WriteString(strings.Join(rows, ""))
		b.WriteString("\n")
	}
}
