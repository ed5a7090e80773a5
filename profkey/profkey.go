// Package profkey names what two builds' profiles have in common: the
// normalized key of a function, so that what is not a change (a renumbered
// closure, a generic instantiation spelled another way, a build directory, a
// module version, an ABI wrapper) does not show as one, and the comment
// that carries a window's successful requests, by which every per-request
// figure is divided. diff (allocdiff), probe ab and flame use it.
package profkey

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// RequestsComment prefixes the profile comment that carries the
// successful requests of the profile's window: "perfspy.requests=N".
const RequestsComment = "perfspy.requests="

// RouteLabel is the sample label that names the route of the request a
// sample's allocations or copies were made for (package routes), so that
// `go tool pprof -tagfocus route=...` selects one; Background is its value
// for work outside any request, BeforeRouting for the work each HTTP/1
// request causes before its route is known (reading and parsing it).
// Profiles of targets without request marks (not net/http) have no such
// label.
const (
	RouteLabel    = "route"
	Background    = "background"
	BeforeRouting = "(before routing)"
	// SelfPrefix prefixes the route of requests a process sends to
	// itself (an upstream, a sidecar or a health check in the same
	// process, its client a socket of its own): "(self) GET /up". Their
	// work is shown on those routes, and they are never counted as the
	// load's requests (the request closure subtracts them).
	SelfPrefix = "(self) "
	// Unfollowed is the route label of work done under the mark of a
	// request that no longer had it: the request had ended (a goroutine
	// it started that outlived it, a worker handed it), or the goroutine
	// had handed it back and went on with work the runtime saw no handoff
	// of (a queue guarded by a mutex). UnfollowedFrom + route names the
	// route it came from; Unfollowed alone, a value whose request could
	// not be told (a goroutine that held several requests' values).
	// Never charged to a route (docs/routes.md, "Unfollowed work").
	Unfollowed     = "(unfollowed)"
	UnfollowedFrom = "(unfollowed) from "
)

// UnfollowedOrigin tells whether route is unfollowed work, and the route
// it came from ("" when unknown).
func UnfollowedOrigin(route string) (origin string, ok bool) {
	if route == Unfollowed {
		return "", true
	}
	return strings.CutPrefix(route, UnfollowedFrom)
}

// EntryLabel is the sample label of allocations and copies that names
// the runtime function the code called when another runtime function
// made them (runtime.mapassign_faststr for a map that grew, whose copies
// go through runtime.typedmemmove): the stacks drop the runtime's frames,
// and a reader that tells a map's growth from the code's own work needs
// it.
const EntryLabel = "entry"

// RouteRequestsComment prefixes the comments that carry each route's
// requests in the window: "perfspy.route_requests=N route" (the route
// last, as it may hold spaces).
const RouteRequestsComment = "perfspy.route_requests="

// SelectRoute keeps p's samples of one route (the label RouteLabel) and
// makes its requests comment that route's: the route's requests
// (RouteRequestsComment), every route's for BeforeRouting, none for the
// Background (its figures are totals). It fails, naming the routes there
// are, when no sample is of that route.
func SelectRoute(p *profile.Profile, route string) error {
	seen := map[string]bool{}
	kept := p.Sample[:0:0]
	for _, s := range p.Sample {
		if v := s.Label[RouteLabel]; len(v) == 1 {
			seen[v[0]] = true
			if v[0] == route {
				kept = append(kept, s)
			}
		}
	}
	if len(seen) == 0 {
		return fmt.Errorf("-route %q: the profile has no %q labels (probe run writes them for net/http targets)", route, RouteLabel)
	}
	if len(kept) == 0 {
		names := make([]string, 0, len(seen))
		for n := range seen {
			names = append(names, strconv.Quote(n))
		}
		sort.Strings(names)
		return fmt.Errorf("-route %q: no sample of that route; the profile has %s", route, strings.Join(names, ", "))
	}
	p.Sample = kept
	var reqs, all int64
	var comments []string
	for _, c := range p.Comments {
		if v, ok := strings.CutPrefix(c, RouteRequestsComment); ok {
			n, name, _ := strings.Cut(v, " ")
			k, _ := strconv.ParseInt(n, 10, 64)
			all += k
			if name == route {
				reqs = k
			}
		}
		if !strings.HasPrefix(c, RequestsComment) {
			comments = append(comments, c)
		}
	}
	if route == BeforeRouting {
		reqs = all
	}
	if reqs > 0 && route != Background {
		comments = append(comments, RequestsComment+strconv.FormatInt(reqs, 10))
	}
	p.Comments = comments
	return nil
}

// RouteRequests are each route's requests in the window, by route, from
// a profile's RouteRequestsComment comments (nil when it has none).
func RouteRequests(p *profile.Profile) map[string]int64 {
	var out map[string]int64
	for _, c := range p.Comments {
		if v, ok := strings.CutPrefix(c, RouteRequestsComment); ok {
			n, name, _ := strings.Cut(v, " ")
			if k, err := strconv.ParseInt(n, 10, 64); err == nil && k > 0 {
				if out == nil {
					out = map[string]int64{}
				}
				out[name] = k
			}
		}
	}
	return out
}

// Requests returns the requests a profile's comment carries, 0 when it has
// none (or a value that is not a positive count).
func Requests(p *profile.Profile) int64 { return RequestsIn(p.Comments) }

// RequestsIn is Requests of a profile's comments.
func RequestsIn(comments []string) int64 {
	for _, c := range comments {
		if v, ok := strings.CutPrefix(c, RequestsComment); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// Folds says which differences a key folds away. The zero value folds
// nothing; DefaultFolds folds everything but inlining.
type Folds struct {
	Closures bool // funcN, glob..funcN, gowrapN, deferwrapN -> func*, ...
	Generics bool // [...], [go.shape.int], [int] -> [...]
	Wrappers bool // ABI wrappers (.abi0, .abiinternal) and method values (-fm)
	Versions bool // /vN major-version path elements, vendor/ prefixes
	Inline   bool // inlined frames charged to their outer function
	Lines    bool // add the line number to the key
}

// DefaultFolds are allocdiff's defaults.
var DefaultFolds = Folds{Closures: true, Generics: true, Wrappers: true, Versions: true}

var (
	closureRE = regexp.MustCompile(`\.(func|gowrap|deferwrap)\d+`)
	nestedRE  = regexp.MustCompile(`\.func\*(\.\d+)+`)
	globRE    = regexp.MustCompile(`glob\.\.func\d+`)
	versionRE = regexp.MustCompile(`/v\d+(/|$)`)
)

// FuncKey normalizes a function name under f.
func FuncKey(name string, f Folds) string {
	if f.Versions {
		if i := strings.LastIndex(name, "/vendor/"); i >= 0 {
			name = name[i+len("/vendor/"):]
		} else {
			name = strings.TrimPrefix(name, "vendor/")
		}
		// Only in the package path, before the first dot after the last slash.
		pkgEnd := pkgPathEnd(name)
		if pkgEnd > 0 && strings.Contains(name[:pkgEnd], "/v") {
			name = versionRE.ReplaceAllString(name[:pkgEnd], "/vN$1") + name[pkgEnd:]
		}
	}
	if f.Generics {
		name = foldBrackets(name)
	}
	if f.Wrappers {
		name = strings.TrimSuffix(name, ".abi0")
		name = strings.TrimSuffix(name, ".abiinternal")
		name = strings.TrimSuffix(name, "-fm")
	}
	// The regular expressions only where they can match: most names
	// have no closure.
	if f.Closures && strings.Contains(name, "glob..func") {
		name = globRE.ReplaceAllString(name, "glob..func*")
	}
	if f.Closures && (strings.Contains(name, ".func") || strings.Contains(name, "wrap")) {
		name = closureRE.ReplaceAllString(name, ".$1*")
		name = nestedRE.ReplaceAllString(name, ".func*")
	}
	return name
}

// pkgPathEnd returns the index just past the package path of a function
// name ("github.com/a/b/v2.F" -> len("github.com/a/b/v2")), or 0.
func pkgPathEnd(name string) int {
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		return 0
	}
	return slash + 1 + dot
}

// foldBrackets replaces the contents of every outermost [...] with "...".
func foldBrackets(name string) string {
	if !strings.Contains(name, "[") {
		return name
	}
	var b strings.Builder
	depth := 0
	for _, r := range name {
		switch {
		case r == '[':
			if depth == 0 {
				b.WriteString("[...")
			}
			depth++
		case r == ']' && depth > 0:
			depth--
			if depth == 0 {
				b.WriteByte(']')
			}
		case depth == 0:
			b.WriteRune(r)
		}
	}
	if depth > 0 {
		b.WriteByte(']')
	}
	return b.String()
}

// StdFunc says whether a function is the standard library's: its
// package path's first element has no dot, and it is not package main's.
// A function with no package path (a symbol the profile could not name)
// is not.
func StdFunc(name string) bool {
	end := pkgPathEnd(name)
	return end > 0 && StdPackage(name[:end])
}

// StdPackage says whether a package path is the standard library's: its
// first element has no dot, and it is not package main.
func StdPackage(pkg string) bool {
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".") && pkg != "main"
}

// TrimStd makes each sample's leaf its innermost frame outside the
// standard library, the code that asked the library for the work
// (strings.(*Builder).grow under a module's function is the module's
// function's); a sample whose every frame is the library's is kept as it
// is. A location holds inlined frames: it is the library's when its
// every line is.
func TrimStd(p *profile.Profile) {
	std := func(l *profile.Location) bool {
		for _, ln := range l.Line {
			if ln.Function == nil || !StdFunc(ln.Function.Name) {
				return false
			}
		}
		return len(l.Line) > 0
	}
	for _, s := range p.Sample {
		i := 0
		for i < len(s.Location) && std(s.Location[i]) {
			i++
		}
		if i < len(s.Location) {
			s.Location = s.Location[i:]
		}
	}
}

// ScaledComment prefixes the comment of a profile whose values were
// divided by its requests (ScalePerRequest): "perfspy.scaled=per N
// requests".
const ScaledComment = "perfspy.scaled="

// ScalePerRequest divides p's values by the requests its comment carries
// (RequestsComment: the window's, or a route's after SelectRoute) and
// multiplies them by per, so that go tool pprof -top reads values per
// request (per 1) or per per requests, and -diff_base compares two runs
// of different request counts. Values are integers: each value index is
// rounded by largest remainder, so that its total is the exact total per
// request rounded, and a sample whose every value rounds to 0 is left out
// (its part is in the others' rounding). The requests comment becomes
// per, so that a reader that divides by it (allocdiff, flame) reads the
// same figures. It fails when p carries no request count or is scaled.
func ScalePerRequest(p *profile.Profile, per int64) error {
	n := Requests(p)
	if n <= 0 {
		return fmt.Errorf("the profile carries no request count (a %q comment): only probe's profiles of a window can be divided per request", RequestsComment)
	}
	if per <= 0 {
		return fmt.Errorf("per %d: want 1 or more requests", per)
	}
	for _, c := range p.Comments {
		if strings.HasPrefix(c, ScaledComment) {
			return fmt.Errorf("the profile is scaled already (%s)", c)
		}
	}
	for i := range p.SampleType {
		scaleIndex(p.Sample, i, per, n)
	}
	p.Sample = slices.DeleteFunc(p.Sample, func(s *profile.Sample) bool {
		return !slices.ContainsFunc(s.Value, func(v int64) bool { return v != 0 })
	})
	var comments []string
	for _, c := range p.Comments {
		if !strings.HasPrefix(c, RequestsComment) && !strings.HasPrefix(c, RouteRequestsComment) {
			comments = append(comments, c)
		}
	}
	p.Comments = append(comments, RequestsComment+strconv.FormatInt(per, 10),
		fmt.Sprintf("%sper %d requests of %d (values rounded by largest remainder: each total is exact, rounded)", ScaledComment, per, n))
	return nil
}

// scaleIndex sets value i of each sample to v*per/n, rounded so that
// the total is round(Σv*per/n): the floors first, then one more to the
// samples of the largest remainders (the first of equal ones).
func scaleIndex(samples []*profile.Sample, i int, per, n int64) {
	type rem struct {
		s    *profile.Sample
		frac float64
	}
	var total float64
	var floors int64
	rems := make([]rem, 0, len(samples))
	for _, s := range samples {
		q := float64(s.Value[i]) * float64(per) / float64(n)
		total += q
		f := int64(math.Floor(q))
		s.Value[i] = f
		floors += f
		rems = append(rems, rem{s, q - float64(f)})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].frac > rems[b].frac })
	for k := int64(0); k < int64(math.Round(total))-floors && int(k) < len(rems); k++ {
		rems[k].s.Value[i]++
	}
}
