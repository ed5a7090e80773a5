package load

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/shellwords"
)

// Request is one entry of a request file: an HTTP request and its weight
// in the mix.
type Request struct {
	Method  string
	Path    string // with its query
	Headers map[string]string
	Body    []byte
	Weight  int
}

// Name is the entry as reports show it: "GET /json".
func (r Request) Name() string { return r.Method + " " + r.Path }

// ParseRequests reads a request file: one request per line,
//
//	METHOD PATH [weight=N] [header="Name: value"]... [body=@FILE]
//
// split into words as a shell would (quotes, backslashes),
// with blank lines and lines starting with # ignored. weight defaults to
// 1; a body file is read relative to the request file's folder (dir),
// once however many lines name it: those requests share its bytes. A file
// holds at most limits.RequestEntries requests whose weights add up to at
// most limits.MixRound, and bodies of at most limits.Bodies × maxBody
// bytes together. Anything else is an error naming the line.
func ParseRequests(r io.Reader, name, dir string, maxBody int64) ([]Request, error) {
	if maxBody <= 0 {
		maxBody = limits.Body
	}
	p := &reqParser{dir: dir, maxBody: maxBody, bodies: map[string][]byte{}}
	var out []Request
	round := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(out) == limits.RequestEntries {
			return nil, fmt.Errorf("%s:%d: more than %d requests in one file: split the mix, or measure its heaviest requests", name, n, limits.RequestEntries)
		}
		req, err := p.line(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if round += req.Weight; round > limits.MixRound {
			return nil, fmt.Errorf("%s:%d: the weights add up to more than %d: lower them (weight=2 and weight=4 are the mix of 1 and 2)", name, n, limits.MixRound)
		}
		out = append(out, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no requests in it (want lines like: GET /path weight=2)", name)
	}
	return out, nil
}

// reqParser reads a request file's lines, each body file once.
type reqParser struct {
	dir     string
	maxBody int64
	bodies  map[string][]byte // by resolved path
	held    int64             // the distinct bodies' bytes
}

// body reads the body file f (as a line names it) or returns the bytes
// read for an earlier line.
func (p *reqParser) body(f string) ([]byte, error) {
	path, err := bodyPath(p.dir, f)
	if err != nil {
		return nil, err
	}
	if b, ok := p.bodies[path]; ok {
		return b, nil
	}
	b, err := ReadBody(path, p.maxBody)
	if err != nil {
		return nil, err
	}
	if p.held += int64(len(b)); p.held > limits.Bodies*p.maxBody {
		return nil, &limits.Error{What: "the request file's bodies", Size: p.held, Limit: limits.Bodies * p.maxBody, Unit: "bytes together", Flag: "-max-body"}
	}
	p.bodies[path] = b
	return b, nil
}

// line reads one line of a request file.
func (p *reqParser) line(line string) (Request, error) {
	words, err := shellwords.Split(line)
	if err != nil {
		return Request{}, err
	}
	if len(words) < 2 {
		return Request{}, fmt.Errorf("want METHOD PATH, got %q", line)
	}
	req := Request{Method: words[0], Path: words[1], Weight: 1}
	if req.Method != strings.ToUpper(req.Method) || !isToken(req.Method) {
		return Request{}, fmt.Errorf("method %q: want an upper-case HTTP method like GET", req.Method)
	}
	if !strings.HasPrefix(req.Path, "/") {
		return Request{}, fmt.Errorf("path %q: must start with /", req.Path)
	}
	if err := CheckPath(req.Path); err != nil {
		return Request{}, err
	}
	for _, w := range words[2:] {
		k, v, ok := strings.Cut(w, "=")
		switch {
		case !ok:
			return Request{}, fmt.Errorf("%q: want weight=N, header=\"Name: value\" or body=@FILE", w)
		case k == "weight":
			if req.Weight, err = strconv.Atoi(v); err != nil || req.Weight < 1 || req.Weight > 1000 {
				return Request{}, fmt.Errorf("weight %q: want 1 to 1000", v)
			}
		case k == "header":
			hk, hv, ok := strings.Cut(v, ":")
			if !ok || strings.TrimSpace(hk) == "" || strings.ContainsAny(hk, " \t") {
				return Request{}, fmt.Errorf("header %q: want \"Name: value\"", v)
			}
			if err := CheckHeader(strings.TrimSpace(hk), hv); err != nil {
				return Request{}, err
			}
			if req.Headers == nil {
				req.Headers = map[string]string{}
			}
			req.Headers[strings.TrimSpace(hk)] = strings.TrimSpace(hv)
		case k == "body":
			f, ok := strings.CutPrefix(v, "@")
			if !ok || f == "" {
				return Request{}, fmt.Errorf("body %q: want body=@FILE", v)
			}
			if req.Body, err = p.body(f); err != nil {
				return Request{}, fmt.Errorf("body: %w", err)
			}
		default:
			return Request{}, fmt.Errorf("%q: unknown key %q (want weight, header or body)", w, k)
		}
	}
	return req, nil
}

// Interleave is the fixed order in which a mix sends its requests: each
// entry as often as its weight in every round of sum(weights), spread by
// smooth weighted round-robin (weights 3 and 1 give 0 0 1 0, not 0 0 0 1).
//
// Smooth weighted round-robin adds each entry's weight to its score every
// step and takes the highest score (the first entry of those), which then
// loses the round's total. Entries of one weight keep scores in step, so
// within a weight they are taken in turn, in file order: the order is made
// from one leader per distinct weight, in sum(weights) × distinct weights
// steps, not sum(weights) × entries (10,000 entries: 1 s).
func Interleave(reqs []Request) []int {
	total := 0
	type group struct {
		w       int
		members []int // entries of weight w, in file order
		next    int   // the member taken next
		cycles  int   // the times every member was taken
	}
	var groups []*group
	byWeight := map[int]*group{}
	for i, r := range reqs {
		total += r.Weight
		g := byWeight[r.Weight]
		if g == nil {
			g = &group{w: r.Weight}
			byWeight[r.Weight] = g
			groups = append(groups, g)
		}
		g.members = append(g.members, i)
	}
	order := make([]int, 0, total)
	for t := 1; t <= total; t++ {
		var best *group
		var bestScore int
		for _, g := range groups {
			// The leader's score: t steps of its weight, less the round's
			// total for each time it was taken.
			score := t*g.w - total*g.cycles
			if best == nil || score > bestScore || score == bestScore && g.members[g.next] < best.members[best.next] {
				best, bestScore = g, score
			}
		}
		order = append(order, best.members[best.next])
		if best.next++; best.next == len(best.members) {
			best.next, best.cycles = 0, best.cycles+1
		}
	}
	return order
}

// CheckPath refuses a request path that cannot go on a request line as
// it is: a space, a control character or a byte past ASCII (percent-encode
// them), which a server answers with 400.
func CheckPath(p string) error {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("path %q: byte %d is %q; percent-encode it (%%%02X)", p, i, c, c)
		}
	}
	return nil
}

// CheckHeader refuses a header whose name is not an HTTP token or whose
// value holds a line break or NUL: either would split the request.
func CheckHeader(name, value string) error {
	if !isToken(name) {
		return fmt.Errorf("header name %q: want letters, digits and !#$%%&'*+-.^_`|~", name)
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return fmt.Errorf("header %s: its value holds a line break or NUL", name)
	}
	return nil
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// bodyPath is a request file's body=@FILE: named relative to the request
// file's folder and inside it, links followed. A request file is often
// the repository's (a review reads the pull request's): it must not send
// a file from elsewhere on the machine.
func bodyPath(dir, f string) (string, error) {
	path, err := limits.Inside(dir, f)
	switch {
	case errors.Is(err, limits.ErrOutside) && filepath.IsAbs(f):
		return "", fmt.Errorf("@%s: name a body file relative to the request file's folder, inside it", f)
	case errors.Is(err, limits.ErrOutside):
		return "", fmt.Errorf("@%s: outside the request file's folder %s", f, dir)
	}
	return path, err
}

// ReadBody reads a request body from a file, within maxBody bytes (0:
// limits.Body): /dev/zero or a pipe that never ends is an error, not a
// run that reads forever.
func ReadBody(path string, maxBody int64) ([]byte, error) {
	if maxBody <= 0 {
		maxBody = limits.Body
	}
	return limits.ReadFile(path, maxBody, "-max-body")
}
