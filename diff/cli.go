package diff

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/outfile"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/profstore"

	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/internal/cmdmain"
)

const usage = `usage: allocdiff [flags] BEFORE AFTER
       allocdiff [flags] BEFORE... -- AFTER...

Compares two builds' pprof profiles function by function, on normalized
keys: closure numbers, generic instantiations, ABI wrappers, module major
versions and vendor prefixes are folded away, so that only real changes
show. Several files per side (or globs) are merged, and give p-values.
Rows add up to the change of the total; the rest is the remainder row.

Exit: 0 done, 1 failed or a regression past -max-regress, 2 usage.

flags:
`

// Command is allocdiff. It returns the exit code.
func Command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("allocdiff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	sample := fs.String("sample", "", "sample type (default alloc_space for allocation profiles, else the profile's default, else the last type)")
	top := fs.Int("top", 20, "rows to show (0: all)")
	format := fs.String("format", "text", "output format: "+strings.Join(Formats, ", "))
	out := fs.String("o", "", "also write a pprof profile of the change to `file`")
	maxRegress := fs.String("max-regress", "", "exit 1 when the total grows by more than this `percent` of before (e.g. 5%)")
	maxAbs := fs.Float64("max-regress-abs", 0, "exit 1 when the total grows by more than this, per request when both sides have requests")
	f := profkey.DefaultFolds
	fs.BoolVar(&f.Closures, "fold-closures", true, "fold closure numbers (funcN, gowrapN, deferwrapN, glob..funcN)")
	fs.BoolVar(&f.Generics, "fold-generics", true, "fold generic instantiations ([...], go.shape.*, type arguments)")
	fs.BoolVar(&f.Wrappers, "fold-wrappers", true, "fold ABI wrappers (.abi0) and method values (-fm)")
	fs.BoolVar(&f.Versions, "fold-versions", true, "fold module major versions (/vN) and vendor/ prefixes")
	inline := fs.String("inline", "keep", "inlined frames: keep (their own rows) or fold (charged to the outer function)")
	fs.BoolVar(&f.Lines, "lines", false, "add line numbers to the keys")
	maxBytes := fs.Int64("max-profile-size", limits.Profile, "refuse a profile over this many `bytes`, inflated")
	var access storeaccess.Access
	access.AddFlags(fs)
	route := fs.String("route", "", "compare one `route` of probe run profiles (their label route=, e.g. \"GET /users/{id}\"), per request of that route")
	perFlag := fs.String("per", "", "divide each profile by `N` ops (or BEFORE,AFTER): plain go test -memprofile profiles carry no count (profiles of probe run -bench do)")
	if code, ok := cmdmain.Parse(fs, args); !ok {
		return code
	}
	switch *inline {
	case "keep":
	case "fold":
		f.Inline = true
	default:
		fmt.Fprintf(stderr, "allocdiff: -inline %q: want keep or fold\n", *inline)
		return cmdmain.Usage
	}
	if !validFormat(*format) {
		fmt.Fprintf(stderr, "allocdiff: -format %q: want one of %s\n", *format, strings.Join(Formats, ", "))
		return cmdmain.Usage
	}
	var pctLimit float64 = -1
	if *maxRegress != "" {
		v, err := strconv.ParseFloat(strings.TrimSuffix(*maxRegress, "%"), 64)
		if err != nil || v < 0 {
			fmt.Fprintf(stderr, "allocdiff: -max-regress %q: want a percentage like 5%%\n", *maxRegress)
			return cmdmain.Usage
		}
		pctLimit = v
	}
	perB, perA, err := parsePer(*perFlag)
	if err != nil {
		fmt.Fprintf(stderr, "allocdiff: -per %q: %v\n", *perFlag, err)
		return cmdmain.Usage
	}
	beforeFiles, afterFiles, err := splitSides(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "allocdiff: %v\n", err)
		fs.Usage()
		return cmdmain.Usage
	}
	if err := checkIO(*maxBytes, &access, *out, append(slices.Clone(beforeFiles), afterFiles...)); err != nil {
		fmt.Fprintf(stderr, "allocdiff: %v\n", err)
		return cmdmain.Usage
	}
	before, after, err := loadSides(beforeFiles, afterFiles, LoadOptions{MaxBytes: *maxBytes, Access: &access, Route: *route}, perB, perA)
	if err != nil {
		fmt.Fprintf(stderr, "allocdiff: %v\n", err)
		return cmdmain.Failed
	}
	res, err := Compare(before, after, Options{Sample: *sample, Folds: f, Stacks: *out != ""})
	if err != nil {
		fmt.Fprintf(stderr, "allocdiff: %v\n", err)
		return cmdmain.Failed
	}
	if err := res.Write(stdout, *format, *top); err != nil {
		fmt.Fprintf(stderr, "allocdiff: %v\n", err)
		return cmdmain.Failed
	}
	if *out != "" {
		if err := writeDiffProfile(*out, res); err != nil {
			fmt.Fprintf(stderr, "allocdiff: -o: %v\n", err)
			return cmdmain.Failed
		}
	}
	if why := res.Regressed(pctLimit, *maxAbs); why != "" {
		fmt.Fprintf(stderr, "allocdiff: regression: %s\n", why)
		return cmdmain.Failed
	}
	return cmdmain.OK
}

// checkIO refuses, before any read, a limit that is not positive, store
// credentials the environment gives wrong, and an output that is an input.
func checkIO(maxBytes int64, access *storeaccess.Access, out string, inputs []string) error {
	if maxBytes <= 0 {
		return fmt.Errorf("-max-profile-size %d: want a positive number of bytes", maxBytes)
	}
	if err := access.FromEnv(os.Getenv); err != nil {
		return err
	}
	if out != "" {
		return outfile.SameAsInput("-o", out, inputs)
	}
	return nil
}

// loadSides reads both sides, each profile divided by its ops when -per
// gave them.
func loadSides(b, a []string, lo LoadOptions, perB, perA int64) (*Side, *Side, error) {
	// Both sides at once: each is a core's work when it is one file.
	var before, after *Side
	var errB, errA error
	done := make(chan struct{})
	go func() {
		defer close(done)
		after, errA = Load(a, lo)
	}()
	before, errB = Load(b, lo)
	<-done
	if errB != nil {
		return nil, nil, errB
	}
	if errA != nil {
		return nil, nil, errA
	}
	if perB > 0 {
		before.SetOps(perB)
		after.SetOps(perA)
	}
	return before, after, nil
}

// parsePer reads -per: N for both sides, or BEFORE,AFTER.
func parsePer(s string) (before, after int64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	b, a, two := strings.Cut(s, ",")
	if !two {
		a = b
	}
	if before, err = strconv.ParseInt(b, 10, 64); err != nil || before <= 0 {
		return 0, 0, errors.New("want a positive op count N, or BEFORE,AFTER")
	}
	if after, err = strconv.ParseInt(a, 10, 64); err != nil || after <= 0 {
		return 0, 0, errors.New("want a positive op count N, or BEFORE,AFTER")
	}
	return before, after, nil
}

func validFormat(f string) bool {
	for _, x := range Formats {
		if x == f {
			return true
		}
	}
	return false
}

// splitSides reads BEFORE AFTER or BEFORE... -- AFTER..., expanding globs.
func splitSides(args []string) ([]string, []string, error) {
	var b, a []string
	dash := -1
	for i, x := range args {
		if x == "--" {
			dash = i
		}
	}
	switch {
	case dash >= 0:
		b, a = args[:dash], args[dash+1:]
	case len(args) == 2:
		b, a = args[:1], args[1:]
	default:
		return nil, nil, fmt.Errorf("want BEFORE AFTER, or BEFORE... -- AFTER...; got %d arguments", len(args))
	}
	expand := func(side string, in []string) ([]string, error) {
		var out []string
		for _, pat := range in {
			if profstore.IsSelection(pat) {
				out = append(out, pat) // a store's selection, not a glob
				continue
			}
			m, err := filepath.Glob(pat)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pat, err)
			}
			if len(m) == 0 {
				if strings.ContainsAny(pat, "*?[") {
					return nil, fmt.Errorf("%s: no file matches", pat)
				}
				m = []string{pat} // let Load name the missing file
			}
			out = append(out, m...)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no %s files", side)
		}
		return out, nil
	}
	var err error
	if b, err = expand("before", b); err != nil {
		return nil, nil, err
	}
	if a, err = expand("after", a); err != nil {
		return nil, nil, err
	}
	return b, a, nil
}

// Regressed says why the change passes a limit, naming the rows that grew
// most; "" when it does not. pct < 0 and abs <= 0 are no limit.
func (r *Result) Regressed(pct, abs float64) string {
	d := float64(r.TotalAfter - r.TotalBefore)
	var why string
	if pct >= 0 && r.TotalBefore > 0 && d > pct/100*float64(r.TotalBefore) {
		why = fmt.Sprintf("the total grew %s, more than %g%%", pctString(r.TotalBefore, r.TotalAfter), pct)
	}
	if abs > 0 {
		v, unit := d, r.Unit
		if r.PerRequest {
			v = float64(r.TotalAfter)/float64(r.ReqAfter) - float64(r.TotalBefore)/float64(r.ReqBefore)
			unit += " per request"
		}
		if v > abs {
			why = fmt.Sprintf("the total grew by %g %s, more than %g", v, unit, abs)
		}
	}
	if why == "" {
		return ""
	}
	var grew []string
	for _, row := range r.Rows {
		if row.FlatDelta() > 0 {
			grew = append(grew, fmt.Sprintf("%s %s", row.Key, signed(row.FlatDelta())))
		}
		if len(grew) == 5 {
			break
		}
	}
	return why + "; grew most: " + strings.Join(grew, ", ")
}

func pctString(b, a int64) string { return pct(b, a) }

func writeDiffProfile(path string, r *Result) error {
	var b bytes.Buffer
	if err := r.DiffProfile().Write(&b); err != nil {
		return err
	}
	return outfile.Write(path, b.Bytes(), 0o644)
}
