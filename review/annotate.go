package review

// The review's annotations: the source lines, in the head revision, whose
// exact per-request (per-op) counts grew, found in the innermost frame of
// the repository's own code of each sample.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/probe"
	"github.com/perfspy/perfspy/profkey"
)

// siteKey is a line of the repository's code.
type siteKey struct {
	file string // relative to the root
	line int
	fn   string
}

// siteCounts are one arm's values by site, summed over its rounds, and
// the requests (ops) they came from.
type siteCounts struct {
	v        map[siteKey][2]float64
	requests int64
}

// addAnnotations annotates the lines behind each count of it that grew.
func (r *Result) addAnnotations(ctx context.Context, root string, it *Item, ab *probe.ABResult) {
	per := "req"
	if it.Kind == "benchmarks" {
		per = "op"
	}
	type want struct {
		failed bool
		metric string
	}
	todo := map[string]*want{} // profile -> what grew
	// A request file's routes are annotated one by one, not as the mix.
	routes := slices.ContainsFunc(it.Changes, func(c Change) bool { return c.Subject != it.Route })
	for _, c := range it.Changes {
		if c.Profile == "" || c.Verdict != "regression" || !IsCount(c.Metric) || routes && it.Kind == "server" && c.Subject == it.Route {
			continue
		}
		w := todo[c.Profile]
		if w == nil {
			w = &want{}
			todo[c.Profile] = w
		}
		w.failed = w.failed || c.Failed
		if w.metric == "" || c.Metric == "allocs/"+per {
			w.metric = c.Metric
		}
	}
	for _, prof := range sortedKeys(todo) {
		w := todo[prof]
		kind := prof[strings.LastIndex(prof, " ")+1:] // allocs, copies or retained
		subject := strings.TrimSpace(strings.TrimSuffix(prof, kind))
		if subject == "" {
			subject = it.Route
		}
		samples := map[string][]string{"allocs": {"alloc_objects", "alloc_space"}, "copies": {"copied_bytes"}, "retained": {"inuse_objects", "inuse_space"}}[kind]
		before := readSites(ab.Profiles["before"][prof], ab.Worktrees["before"], samples)
		after := readSites(ab.Profiles["after"][prof], ab.Worktrees["after"], samples)
		if before.requests == 0 || after.requests == 0 {
			continue
		}
		lines := lineMaps{ctx: ctx, root: root, base: r.Base["commit"], head: r.Head["commit"], m: map[string][]hunk{}}
		grown := map[siteKey][2]float64{}
		for k, v := range after.v {
			grown[k] = [2]float64{v[0] / float64(after.requests), v[1] / float64(after.requests)}
		}
		for k, v := range before.v {
			line, ok := lines.toHead(k.file, k.line)
			if !ok {
				continue // the line is gone in the head
			}
			hk := siteKey{k.file, line, k.fn}
			g := grown[hk]
			g[0] -= v[0] / float64(before.requests)
			g[1] -= v[1] / float64(before.requests)
			grown[hk] = g
		}
		for k, g := range grown {
			a := Annotation{Level: "warning", File: k.file, Line: k.line, Func: k.fn, Item: it.Name, Subject: subject, Metric: w.metric, Delta: g[0]}
			if w.failed {
				a.Level = "error"
			}
			switch {
			case kind == "retained" && g[1] >= 0.5:
				a.Metric, a.Bytes = "retained-B/"+per, g[1]
				a.Message = fmt.Sprintf("%s B/%s (%+.2f objects) left live in %s", signedNum(g[1]), per, g[0], subject)
				a.Title = "perfspy: memory left live grew in " + shortFunc(k.fn)
			case kind == "copies" && g[0] >= 0.5:
				a.Metric = "copied-B/" + per
				a.Message = fmt.Sprintf("%s copied B/%s in %s", signedNum(g[0]), per, subject)
				a.Title = "perfspy: bytes copied grew in " + shortFunc(k.fn)
			case kind == "allocs" && (g[0] >= 0.005 || g[1] >= 0.5):
				a.Metric, a.Bytes = "allocs/"+per, g[1]
				a.Message = fmt.Sprintf("%+.2f allocs/%s (%s B) in %s", g[0], per, signedNum(g[1]), subject)
				a.Title = "perfspy: allocations grew in " + shortFunc(k.fn)
			default:
				continue
			}
			r.Annotations = append(r.Annotations, a)
		}
	}
	slices.SortFunc(r.Annotations, func(a, b Annotation) int {
		if a.Level != b.Level {
			return strings.Compare(a.Level, b.Level) // error before warning
		}
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Subject+a.Metric, b.Subject+b.Metric)
	})
}

// num prints a per-request figure: whole numbers as they are, others with
// two decimals.
func num(v float64) string {
	if math.Abs(v-math.Round(v)) < 0.005 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// signedNum is num with its sign.
func signedNum(v float64) string {
	if v >= 0 {
		return "+" + num(v)
	}
	return num(v)
}

// shortFunc drops a function's package path (main.(*T).get stays).
func shortFunc(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// readSites sums the samples of files by the innermost frame in the
// worktree (the repository's own code, vendored code left out), with the
// requests the files carry. An unreadable file is left out.
func readSites(files []string, worktree string, samples []string) siteCounts {
	sc := siteCounts{v: map[siteKey][2]float64{}}
	prefix := strings.TrimSuffix(worktree, "/") + "/"
	for _, f := range files {
		p, err := readProfile(f)
		if err != nil {
			continue
		}
		n := profkey.Requests(p)
		var idx []int
		for _, s := range samples {
			i := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == s })
			if i < 0 {
				break
			}
			idx = append(idx, i)
		}
		if n <= 0 || len(idx) != len(samples) {
			continue
		}
		sc.requests += n
		for _, s := range p.Sample {
			k, ok := ownFrame(s, prefix)
			if !ok {
				continue
			}
			v := sc.v[k]
			for j, i := range idx {
				v[j] += float64(s.Value[i])
			}
			sc.v[k] = v
		}
	}
	return sc
}

// ownFrame is the sample's innermost line in the repository's own code.
func ownFrame(s *profile.Sample, prefix string) (siteKey, bool) {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function == nil {
				continue
			}
			if rel, ok := strings.CutPrefix(l.Function.Filename, prefix); ok && !strings.HasPrefix(rel, "vendor/") {
				return siteKey{rel, int(l.Line), l.Function.Name}, true
			}
		}
	}
	return siteKey{}, false
}

// readProfile reads a profile probe ab's rounds wrote, within the limit
// any profile input has.
func readProfile(path string) (*profile.Profile, error) {
	b, err := limits.ReadFile(path, limits.Profile, "-max-profile-size")
	if err != nil {
		return nil, err
	}
	return profile.ParseData(b)
}

// hunk is a change of `git diff -U0`: lines a.. (b of them) of the base
// became lines c.. (d of them) of the head.
type hunk struct{ a, b, c, d int }

// lineMaps maps the base's lines of a file to the head's, from git diff.
type lineMaps struct {
	ctx              context.Context
	root, base, head string
	m                map[string][]hunk
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// toHead is line's number in the head, or false when the head changed or
// removed it.
func (lm *lineMaps) toHead(file string, line int) (int, bool) {
	hunks, ok := lm.m[file]
	if !ok {
		out, err := git(lm.ctx, lm.root, "diff", "-U0", "--no-color", "--no-ext-diff", lm.base, lm.head, "--", file)
		if err != nil {
			lm.m[file] = nil
			return line, true
		}
		hunks = parseHunks(out)
		lm.m[file] = hunks
	}
	return mapLine(hunks, line)
}

func parseHunks(diff string) []hunk {
	var hs []hunk
	for _, l := range strings.Split(diff, "\n") {
		m := hunkHeader.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		at := func(i int, def int) int {
			if m[i] == "" {
				return def
			}
			v, _ := strconv.Atoi(m[i])
			return v
		}
		hs = append(hs, hunk{at(1, 0), at(2, 1), at(3, 0), at(4, 1)})
	}
	return hs
}

// mapLine moves a base line past the hunks before it.
func mapLine(hunks []hunk, line int) (int, bool) {
	off := 0
	for _, h := range hunks {
		if h.b == 0 { // lines added after line a
			if line <= h.a {
				break
			}
			off += h.d
			continue
		}
		if line < h.a {
			break
		}
		if line < h.a+h.b {
			return 0, false
		}
		off += h.d - h.b
	}
	return line + off, true
}

// codeQualityIssue is one issue of a GitLab Code Quality report (the
// subset of the Code Climate format GitLab reads).
type codeQualityIssue struct {
	Description string `json:"description"`
	CheckName   string `json:"check_name"`
	Fingerprint string `json:"fingerprint"`
	Severity    string `json:"severity"` // major for an error, minor for a warning
	Location    struct {
		Path  string `json:"path"`
		Lines struct {
			Begin int `json:"begin"`
		} `json:"lines"`
	} `json:"location"`
}

// codeQuality is the annotations as a GitLab Code Quality report.
func codeQuality(as []Annotation) ([]byte, error) {
	issues := make([]codeQualityIssue, 0, len(as))
	for _, a := range as {
		var q codeQualityIssue
		q.Description = a.Title + ": " + a.Message
		q.CheckName = "perfspy-" + strings.NewReplacer("/", "-per-").Replace(a.Metric)
		q.Fingerprint = fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join([]string{a.Item, a.Subject, a.Metric, a.File, a.Func, strconv.Itoa(a.Line)}, "\x00"))))[:32]
		q.Severity = map[string]string{"error": "major", "warning": "minor"}[a.Level]
		q.Location.Path = a.File
		q.Location.Lines.Begin = a.Line
		issues = append(issues, q)
	}
	b, err := json.MarshalIndent(issues, "", "  ")
	return append(b, '\n'), err
}

// workflowCommand is a GitHub workflow command line for a.
func workflowCommand(a Annotation) string {
	prop := func(s string) string {
		return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
	}
	data := strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(a.Message)
	return fmt.Sprintf("::%s file=%s,line=%d,title=%s::%s", a.Level, prop(a.File), a.Line, prop(a.Title), data)
}
