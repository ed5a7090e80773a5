// Package callgrind reads valgrind --tool=callgrind output files, part by
// part, into exclusive costs by function and inclusive costs by call edge.
//
// Pitfalls it handles, each of which produced wrong numbers in the rig it
// replaces: a "totals:" (or "summary:") line is not a cost line; parts are
// separated by "part:" with the colon; "fn=" and "cfn=" may define a name
// on the same line as its "(id)"; the cost line after "calls=" is the
// call's inclusive cost, not the caller's own; positions may be relative
// ("+N", "-N", "*").
package callgrind

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Part is one dump: the costs since the previous one.
type Part struct {
	Number  int
	Trigger string           // desc: Trigger, e.g. "Client Request" or "Program termination"
	Self    map[string]int64 // exclusive cost (first event) by function
	Calls   map[[2]string]int64
	Total   int64 // the sum of Self
	Totals  int64 // what the file's totals: line says, when it has one
	// Lines is the exclusive cost by function and source line (the
	// positions of a file written with --dump-line=yes, the default, and
	// --dump-instr=no). The file is the line's own: code inlined from
	// another file is at that file's line, under the function it was
	// inlined into (callgrind names functions by symbol).
	Lines map[Line]int64
	// CallLines is the inclusive cost of the calls each line made, by
	// callee: what Charges follows from a library's lines back to the
	// caller's own line that led to them.
	CallLines map[Call]int64
	// Files is each function's own file (the fl= its fn= came under): the
	// file that says whose code the function is.
	Files map[string]string
}

// Call is the calls a source line made to one function; with addresses,
// Target is the address the calls went to (a true call enters the callee
// at its first instruction).
type Call struct {
	From   Line
	To     string
	Target uint64
}

// Line is a function's source line; with --dump-instr=yes, one
// instruction's address of it (0 when the file has no addresses).
type Line struct {
	Func, File string
	Line       int64
	Addr       uint64
}

// ParseError is a line the parser cannot read.
type ParseError struct {
	Line int
	Text string
	Why  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("callgrind line %d: %s: %q", e.Line, e.Why, e.Text)
}

// Parse reads every part of a callgrind file.
func Parse(r io.Reader) ([]*Part, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	p := &parser{names: map[string]map[string]string{"fn": {}, "fl": {}, "ob": {}}, lines: true}
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		t := strings.TrimSpace(text)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if p.cur == nil {
			p.newPart(1)
		}
		if err := p.line(t); err != "" {
			return nil, &ParseError{line, text, err}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("callgrind line %d: %w", line+1, err)
	}
	if len(p.parts) == 0 {
		return nil, fmt.Errorf("no callgrind parts")
	}
	return p.parts, nil
}

// parser holds what a callgrind file's lines set for the lines after them.
type parser struct {
	names   map[string]map[string]string // compressed names by kind: fn, fl, ob
	parts   []*Part
	cur     *Part
	fn, cfn string
	fl      string // the function's file (fl=)
	file    string // the cost lines' file: fl, or an inlined one's (fi=, fe=)
	inCall  bool   // the next cost line is a call's inclusive cost
	target  uint64 // the address the call went to (calls=), 0 without addresses
	// The positions' kinds ("positions: instr line": an address, then a
	// line) and each one's last value (relative positions follow it).
	instr, lines bool
	lastAddr     int64
	lastPos      int64
}

func (p *parser) newPart(n int) {
	p.cur = NewPart()
	p.cur.Number = n
	p.parts = append(p.parts, p.cur)
}

// NewPart is an empty part, its maps made.
func NewPart() *Part {
	return &Part{Self: map[string]int64{}, Calls: map[[2]string]int64{}, Lines: map[Line]int64{}, CallLines: map[Call]int64{}, Files: map[string]string{}}
}

// Add adds q's costs to p's (sign 1) or takes them from it (sign -1).
func (p *Part) Add(q *Part, sign int64) {
	for k, v := range q.Self {
		p.Self[k] += sign * v
	}
	for k, v := range q.Calls {
		p.Calls[k] += sign * v
	}
	for k, v := range q.Lines {
		p.Lines[k] += sign * v
	}
	for k, v := range q.CallLines {
		p.CallLines[k] += sign * v
	}
	for k, v := range q.Files {
		if _, ok := p.Files[k]; !ok {
			p.Files[k] = v
		}
	}
	p.Total += sign * q.Total
}

// line reads one line (trimmed, not empty, not a comment); it returns why
// the line is wrong, "" when it is not.
func (p *parser) line(t string) string {
	key, val, isKV := strings.Cut(t, "=")
	if isKV && !strings.ContainsAny(key, " \t") {
		return p.spec(key, val)
	}
	if k, v, ok := strings.Cut(t, ":"); ok && !startsCost(t) {
		return p.header(strings.TrimSpace(k), v)
	}
	return p.cost(t)
}

// spec reads a key=value line: the names that the cost lines after it
// belong to, and calls=.
func (p *parser) spec(key, val string) string {
	switch key {
	case "fn", "cfn", "fl", "fi", "fe", "cfl", "cfi", "ob", "cob":
		kind := key
		switch key {
		case "cfn":
			kind = "fn"
		case "fi", "fe", "cfl", "cfi":
			kind = "fl"
		case "cob":
			kind = "ob"
		}
		name, err := compressed(p.names[kind], val)
		if err != nil {
			return err.Error()
		}
		switch key {
		case "fn":
			p.fn, p.file = baseName(name), p.fl
			if _, ok := p.cur.Files[p.fn]; !ok {
				p.cur.Files[p.fn] = p.fl
			}
		case "cfn":
			p.cfn = baseName(name)
		case "fl":
			p.fl, p.file = name, name
		case "fi", "fe":
			p.file = name
		}
	case "calls":
		p.inCall, p.target = true, 0
		// calls=COUNT TARGET: with addresses, the target's first position
		// is the address called, relative to the last address but not
		// moving it.
		if f := strings.Fields(val); p.instr && len(f) >= 2 {
			last := p.lastAddr
			if a, err := position(f[1], &last); err == nil {
				p.target = uint64(a)
			}
		}
	}
	return "" // jump=, jcnd= and the rest carry no cost
}

// header reads a key: value line: part, totals, desc.
func (p *parser) header(k, v string) string {
	switch k {
	case "part":
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return "bad part number"
		}
		if p.cur.Number != n || len(p.cur.Self) > 0 || len(p.cur.Calls) > 0 {
			p.newPart(n)
		}
		p.fn, p.cfn, p.inCall = "", "", false
	case "positions":
		p.instr, p.lines = false, false
		for _, f := range strings.Fields(v) {
			switch f {
			case "instr":
				p.instr = true
			case "line":
				p.lines = true
			default:
				return "unknown position " + strconv.Quote(f)
			}
		}
		if !p.instr && !p.lines {
			return "no positions"
		}
	case "totals", "summary":
		if f := strings.Fields(v); len(f) > 0 {
			p.cur.Totals, _ = strconv.ParseInt(f[0], 10, 64)
		}
	case "desc":
		if d, ok := strings.CutPrefix(strings.TrimSpace(v), "Trigger:"); ok {
			p.cur.Trigger = strings.TrimSpace(d)
		}
	}
	return ""
}

// cost reads a cost line: a position, then events (the first is Ir).
func (p *parser) cost(t string) string {
	f := strings.Fields(t)
	// The positions the header named, in its order, each relative to its
	// own last value.
	var addr, pos int64
	for _, sub := range []struct {
		on        bool
		last, out *int64
	}{{p.instr, &p.lastAddr, &addr}, {p.lines, &p.lastPos, &pos}} {
		if !sub.on {
			continue
		}
		if len(f) < 1 {
			return "a position missing"
		}
		v, err := position(f[0], sub.last)
		if err != nil {
			return err.Error()
		}
		*sub.out, f = v, f[1:]
	}
	var cost int64
	if len(f) > 0 {
		c, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return "bad cost"
		}
		cost = c
	}
	if p.inCall {
		p.cur.Calls[[2]string{p.fn, p.cfn}] += cost
		p.cur.CallLines[Call{Line{p.fn, p.file, pos, uint64(addr)}, p.cfn, p.target}] += cost
		p.inCall = false
		return ""
	}
	if p.fn == "" {
		return "cost line before any fn="
	}
	p.cur.Self[p.fn] += cost
	p.cur.Lines[Line{p.fn, p.file, pos, uint64(addr)}] += cost
	p.cur.Total += cost
	return ""
}

// startsCost says whether a line is a cost line (position first).
func startsCost(t string) bool {
	c := t[0]
	return c >= '0' && c <= '9' || c == '+' || c == '-' || c == '*'
}

// compressed resolves name compression: "(id) name" defines, "(id)"
// refers, a bare name is itself.
// baseName drops the recursion level callgrind appends to a function
// that calls itself ("main.walk'2"): the levels are one function, and
// rows of their own would show one change as several.
func baseName(fn string) string {
	i := strings.LastIndexByte(fn, '\'')
	if i <= 0 || i == len(fn)-1 {
		return fn
	}
	for _, c := range fn[i+1:] {
		if c < '0' || c > '9' {
			return fn
		}
	}
	return fn[:i]
}

func compressed(table map[string]string, v string) (string, error) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "(") {
		return v, nil
	}
	end := strings.IndexByte(v, ')')
	if end < 0 {
		return "", fmt.Errorf("unclosed name id")
	}
	id, name := v[1:end], strings.TrimSpace(v[end+1:])
	if name != "" {
		table[id] = name
		return name, nil
	}
	n, ok := table[id]
	if !ok {
		return "", fmt.Errorf("name id (%s) used before it is defined", id)
	}
	return n, nil
}

// position reads an absolute or relative position.
func position(p string, last *int64) (int64, error) {
	switch {
	case p == "*":
		return *last, nil
	case p[0] == '+' || p[0] == '-':
		d, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad position")
		}
		*last += d
	default:
		v, err := strconv.ParseInt(p, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("bad position")
		}
		*last = v
	}
	return *last, nil
}

// Row is one function's exclusive cost.
type Row struct {
	Func string
	Cost int64
}

// Top returns the part's functions by exclusive cost, largest first.
func (p *Part) Top() []Row {
	out := make([]Row, 0, len(p.Self))
	for f, c := range p.Self {
		out = append(out, Row{f, c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cost != out[j].Cost {
			return out[i].Cost > out[j].Cost
		}
		return out[i].Func < out[j].Func
	})
	return out
}

// MemmoveClass reports functions whose instruction count under callgrind
// is really a byte count: rep movsb/stosb are charged one per byte.
func MemmoveClass(fn string) bool {
	switch fn {
	case "runtime.memmove", "runtime.memclrNoHeapPointers", "memcpy", "memmove", "memset":
		return true
	}
	return false
}

// Inclusive is fn's own cost plus the inclusive cost of the calls it makes.
func (p *Part) Inclusive(fn string) int64 {
	c := p.Self[fn]
	for edge, v := range p.Calls {
		if edge[0] == fn && edge[1] != fn {
			c += v
		}
	}
	return c
}
