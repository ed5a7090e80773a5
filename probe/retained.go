package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/allocspy"
	"github.com/perfspy/perfspy/benchwin"
	"github.com/perfspy/perfspy/schema"
)

// Sources of the retained window's figures.
const (
	SourceRetained       = "heapprofile-rate1-live (the retained window: in use after two GCs, at its end minus at its begin, per stack, growth only)"
	SourceGoroutinesLeft = "goroutine-dump (the retained window: goroutines alive at its end that were not at its begin, after two GCs)"
	// SourceGoroutinesLeaked is the leaked part's source (Go 1.27 on).
	SourceGoroutinesLeaked = "goroutineleak profile (the GC's: goroutines left blocked on what no running goroutine can reach, so they can never run again)"
)

// retainedProfile reads what the retained window left (the agent's
// wire.RetainedReport at path+".json") as a profile, without the samples
// through perfspy's instruments.
func retainedProfile(path string) (*profile.Profile, error) {
	rep, err := benchwin.ReadRetained(path)
	if err != nil {
		return nil, err
	}
	return dropInstruments(allocspy.RetainedProfile(rep)), nil
}

// retained: the retained window's heap still live (retained.pb.gz) and
// goroutines still running (goroutines_left.pb.gz), per request.
func (o *runOutput) retained() error {
	w, path, s := o.win.retained, o.raw.retained, o.s
	if w == nil || path == "" {
		return nil
	}
	s.RetainedWindow = windowSummary(w)
	n := w.load.OK
	rp, err := retainedProfile(path)
	if err != nil {
		return fmt.Errorf("retained: %w", err)
	}
	rp.Comments = o.comments(w)
	if err := o.addProfile("retained.pb.gz", rp); err != nil {
		return err
	}
	s.Files["retained"] = "retained.pb.gz"
	s.Sources["retained"] = SourceRetained
	left, err := goroutinesLeft(path)
	if err != nil {
		return fmt.Errorf("goroutines left: %w", err)
	}
	gp := goroutinesProfile(left)
	gp.Comments = o.comments(w)
	if err := o.addProfile("goroutines_left.pb.gz", gp); err != nil {
		return err
	}
	s.Files["goroutines_left"] = "goroutines_left.pb.gz"
	s.Sources["goroutines_left"] = SourceGoroutinesLeft
	if n <= 0 {
		return nil
	}
	t := totals(rp)
	s.PerRequest.RetainedObjects = f64(round(float64(t[0])/float64(n), 4))
	s.PerRequest.RetainedBytes = f64(round(float64(t[1])/float64(n), 2))
	s.PerRequest.GoroutinesLeft = f64(round(float64(len(left))/float64(n), 4))
	if leakProfile(path) {
		leaked := 0
		for _, g := range left {
			if g.leaked {
				leaked++
			}
		}
		s.PerRequest.GoroutinesLeaked = f64(round(float64(leaked)/float64(n), 4))
		s.Sources["goroutines_leaked"] = SourceGoroutinesLeaked
	}
	for _, site := range topSites(rp, 1) {
		s.RetainedSites = append(s.RetainedSites, schema.RetainedSite{Func: site.Func, Objects: round(float64(site.Values[0])/float64(n), 4), Bytes: round(float64(site.Values[1])/float64(n), 2)})
	}
	s.GoroutinesLeft = groupGoroutines(left, n)
	return nil
}

// goroutine is one goroutine of a debug=2 dump.
type goroutine struct {
	id        int64
	state     string
	leaked    bool     // "(leaked)": the goroutine leak profile's GC found it blocked for good
	frames    []gframe // innermost first
	createdBy gframe   // zero for the main goroutine
}

type gframe struct {
	fn, file string
	line     int64
}

func (f gframe) String() string {
	if f.file == "" {
		return f.fn
	}
	return fmt.Sprintf("%s (%s:%d)", f.fn, f.file, f.line)
}

// maxGoroutineDump bounds a dump read: a leak of millions of goroutines
// is said from the first ones, not read whole.
const maxGoroutineDump = 256 << 20

// parseGoroutines reads a goroutine dump as runtime/pprof writes it
// with debug=2 (a panic's traceback too): "goroutine N [state]:" blocks
// of "func(args)" and "\tfile:line +0x.." line pairs, ending with
// "created by F in goroutine M" and its file line.
func parseGoroutines(b []byte) ([]goroutine, error) {
	var out []goroutine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var g *goroutine
	var last *gframe // the frame whose file line comes next
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "goroutine "):
			id, state, ok := goroutineHeader(line)
			if !ok {
				return nil, fmt.Errorf("line %d: want \"goroutine N [state]:\", got %q", n, truncateText(line))
			}
			state, leaked := strings.CutSuffix(state, " (leaked)")
			out = append(out, goroutine{id: id, state: state, leaked: leaked})
			g, last = &out[len(out)-1], nil
		case g == nil || line == "" || strings.HasPrefix(line, "..."):
			last = nil
		case strings.HasPrefix(line, "\t"):
			if last != nil {
				last.file, last.line = fileLine(strings.TrimSpace(line))
				last = nil
			}
		case strings.HasPrefix(line, "created by "):
			fn := strings.TrimPrefix(line, "created by ")
			if i := strings.Index(fn, " in goroutine "); i >= 0 {
				fn = fn[:i]
			}
			g.createdBy = gframe{fn: fn}
			last = &g.createdBy
		default:
			g.frames = append(g.frames, gframe{fn: funcOf(line)})
			last = &g.frames[len(g.frames)-1]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// goroutineHeader reads "goroutine 12 [chan receive, 5 minutes]:".
func goroutineHeader(line string) (int64, string, bool) {
	rest := strings.TrimPrefix(line, "goroutine ")
	sp := strings.IndexByte(rest, ' ')
	if sp < 0 {
		return 0, "", false
	}
	id, err := strconv.ParseInt(rest[:sp], 10, 64)
	open, end := strings.IndexByte(rest, '['), strings.LastIndexByte(rest, ']')
	if err != nil || open < 0 || end < open {
		return 0, "", false
	}
	state, _, _ := strings.Cut(rest[open+1:end], ",")
	return id, state, true
}

// funcOf is the function of a frame line: "main.f(0x1, ...)" -> main.f.
func funcOf(line string) string {
	if i := strings.LastIndexByte(line, '('); i > 0 && strings.HasSuffix(line, ")") {
		return line[:i]
	}
	return line
}

// fileLine reads "/src/main.go:12 +0x1d".
func fileLine(s string) (string, int64) {
	s, _, _ = strings.Cut(s, " +0x")
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 0
	}
	n, _ := strconv.ParseInt(s[i+1:], 10, 64)
	return s[:i], n
}

func truncateText(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// goroutinesLeft reads the dumps at path+".goroutines" and
// path+".goroutines.end" and returns goroutinesLeftOf them.
func goroutinesLeft(path string) ([]goroutine, error) {
	var dumps [2][]byte
	for i, p := range []string{path + ".goroutines", path + ".goroutines.end"} {
		b, err := readBounded(p, maxGoroutineDump)
		if err != nil {
			return nil, err
		}
		dumps[i] = b
	}
	left, err := goroutinesLeftOf(dumps[0], dumps[1])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return left, nil
}

// goroutinesLeftOf returns the goroutines of the dump at a window's end
// that the dump at its begin did not have, but perfspy's own.
func goroutinesLeftOf(begin, end []byte) ([]goroutine, error) {
	before, err := parseGoroutines(begin[:min(len(begin), maxGoroutineDump)])
	if err != nil {
		return nil, fmt.Errorf("the dump at the begin: %w", err)
	}
	after, err := parseGoroutines(end[:min(len(end), maxGoroutineDump)])
	if err != nil {
		return nil, fmt.Errorf("the dump at the end: %w", err)
	}
	had := map[int64]bool{}
	for _, g := range before {
		had[g.id] = true
	}
	var left []goroutine
	for _, g := range after {
		if had[g.id] || isInstrument(g.createdBy.fn) || len(g.frames) > 0 && isInstrument(g.frames[len(g.frames)-1].fn) {
			continue
		}
		left = append(left, g)
	}
	return left, nil
}

// readBounded reads a file of at most limit bytes: a bigger one is cut
// there (its last goroutine, cut short, reads as a shorter one).
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(io.LimitReader(f, limit))
	return b.Bytes(), err
}

// goroutineFunc is the function a goroutine runs: its outermost frame.
func goroutineFunc(g goroutine) string {
	if len(g.frames) == 0 {
		return "(no stack)"
	}
	return g.frames[len(g.frames)-1].fn
}

// groupGoroutines counts the goroutines by function and creator, most
// first, each per request of n.
func groupGoroutines(gs []goroutine, n int64) []schema.GoroutinesLeft {
	count, leaked := map[[2]string]int{}, map[[2]string]int{}
	for _, g := range gs {
		k := [2]string{goroutineFunc(g), g.createdBy.String()}
		count[k]++
		if g.leaked {
			leaked[k]++
		}
	}
	out := make([]schema.GoroutinesLeft, 0, len(count))
	for k, c := range count {
		gl := schema.GoroutinesLeft{Func: k[0], CreatedBy: k[1], Count: c, Leaked: leaked[k]}
		if n > 0 {
			gl.PerReq = round(float64(c)/float64(n), 4)
		}
		out = append(out, gl)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Func+out[i].CreatedBy < out[j].Func+out[j].CreatedBy
	})
	return out
}

// goroutinesProfile is the goroutines as a pprof profile: one sample per
// stack and creator (label created_by), the count as its value.
func goroutinesProfile(gs []goroutine) *profile.Profile {
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "goroutines", Unit: "count"}},
		PeriodType:        &profile.ValueType{Type: "goroutines", Unit: "count"},
		Period:            1,
		DefaultSampleType: "goroutines",
	}
	funcs := map[string]*profile.Function{}
	locs := map[gframe]*profile.Location{}
	loc := func(f gframe) *profile.Location {
		if l := locs[f]; l != nil {
			return l
		}
		fn := funcs[f.fn+"\x00"+f.file]
		if fn == nil {
			fn = &profile.Function{ID: uint64(len(p.Function) + 1), Name: f.fn, SystemName: f.fn, Filename: f.file}
			funcs[f.fn+"\x00"+f.file] = fn
			p.Function = append(p.Function, fn)
		}
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn, Line: f.line}}}
		locs[f] = l
		p.Location = append(p.Location, l)
		return l
	}
	samples := map[string]*profile.Sample{}
	var keys []string
	for _, g := range gs {
		var k strings.Builder
		for _, f := range g.frames {
			k.WriteString(f.String() + ";")
		}
		k.WriteString("\x00" + g.createdBy.String())
		if s := samples[k.String()]; s != nil {
			s.Value[0]++
			continue
		}
		s := &profile.Sample{Value: []int64{1}, Label: map[string][]string{"created_by": {g.createdBy.String()}}}
		for _, f := range g.frames {
			s.Location = append(s.Location, loc(f))
		}
		samples[k.String()] = s
		keys = append(keys, k.String())
	}
	for _, k := range keys {
		p.Sample = append(p.Sample, samples[k])
	}
	return p
}

// leakProfile reports whether the end dump of the retained window at path
// came from the goroutine leak profile (Go 1.27 on): the agent names the
// profile it dumped in path+".goroutines.end.profile".
func leakProfile(path string) bool {
	b, err := readBounded(path+".goroutines.end.profile", 64)
	return err == nil && strings.TrimSpace(string(b)) == "goroutineleak"
}
