package flame

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/internal/outfile"
	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/profstore"

	"github.com/google/pprof/profile"
	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/internal/cmdmain"
)

const usage = `usage: flame [-o out.svg|out.html] [-sample NAME] INPUT
       flame -diff [-o out.svg|out.html] [-sample NAME] BEFORE AFTER

INPUT is a pprof profile (gzipped or not) or folded stacks ("a;b;c 10" per
line). The output format follows -o's extension: .svg (the default, on
standard output without -o) or .html (a single file with zoom, search, an
icicle view and a callers/callees sandwich). -diff colors growth red and
shrinkage blue on the after profile's widths, keeps removed frames
visible, and keys frames by allocdiff's normalized names.

Exit: 0 done, 1 failed, 2 usage.

flags:
`

// Command is the flame command. It returns the exit code.
func Command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flame", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	out := fs.String("o", "", "output `file`: .svg or .html (default: SVG on standard output)")
	sample := fs.String("sample", "", "pprof sample type (default: the profile's default, else the last)")
	title := fs.String("title", "", "graph title")
	isDiff := fs.Bool("diff", false, "differential: BEFORE AFTER")
	icicle := fs.Bool("icicle", false, "SVG: draw the root at the top")
	fold := fs.Bool("fold", false, "fold names as allocdiff does (closure numbers, generics, wrappers, versions); always on with -diff")
	maxBytes := fs.Int64("max-profile-size", limits.Profile, "refuse an input over this many `bytes` inflated (gzip) or, for a profile, read whole")
	route := fs.String("route", "", "draw one `route` of a probe run profile (its label route=, e.g. \"GET /users/{id}\", background, \"(before routing)\")")
	maxDepth := fs.Int("max-depth", limits.Depth, fmt.Sprintf("refuse a stack of more than this many `frames` (at most %d)", limits.MaxDepth))
	var access storeaccess.Access
	access.AddFlags(fs)
	if code, ok := cmdmain.Parse(fs, args); !ok {
		return code
	}
	want := 1
	if *isDiff {
		want = 2
	}
	if fs.NArg() != want {
		fmt.Fprintf(stderr, "flame: want %d input file(s), got %d\n", want, fs.NArg())
		fs.Usage()
		return cmdmain.Usage
	}
	format := "svg"
	switch ext := strings.ToLower(filepath.Ext(*out)); ext {
	case "", ".svg":
	case ".html", ".htm":
		format = "html"
	default:
		fmt.Fprintf(stderr, "flame: -o %s: want a .svg or .html file\n", *out)
		return cmdmain.Usage
	}
	if *maxBytes <= 0 || *maxDepth <= 0 || *maxDepth > limits.MaxDepth {
		fmt.Fprintf(stderr, "flame: -max-profile-size and -max-depth want a positive number (-max-depth at most %d)\n", limits.MaxDepth)
		return cmdmain.Usage
	}
	if err := access.FromEnv(os.Getenv); err != nil {
		fmt.Fprintf(stderr, "flame: %v\n", err)
		return cmdmain.Usage
	}
	if *out != "" {
		if err := outfile.SameAsInput("-o", *out, fs.Args()); err != nil {
			fmt.Fprintf(stderr, "flame: %v\n", err)
			return cmdmain.Usage
		}
	}
	opt := Options{Sample: *sample, MaxBytes: *maxBytes, MaxDepth: *maxDepth, Route: *route, access: &access}
	if *fold {
		opt.Folds = profkey.DefaultFolds
	}
	t, err := readInputs(fs.Args(), opt, *isDiff)
	if err != nil {
		fmt.Fprintf(stderr, "flame: %v\n", err)
		return cmdmain.Failed
	}
	if t.Ignored > 0 {
		fmt.Fprintf(stderr, "flame: %s: ignored %d lines that are not \"stack count\", as flamegraph.pl does (the first: %v)\n", fs.Arg(0), t.Ignored, t.FirstIgnored)
	}
	var buf bytes.Buffer
	if format == "html" {
		err = WriteHTML(&buf, t, *title)
	} else {
		err = WriteSVG(&buf, t, SVGOptions{Title: *title, Inverted: *icicle})
	}
	if err != nil {
		fmt.Fprintf(stderr, "flame: %v\n", err)
		return cmdmain.Failed
	}
	if *out == "" {
		stdout.Write(buf.Bytes())
		return cmdmain.OK
	}
	if err := outfile.Write(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "flame: %v\n", err)
		return cmdmain.Failed
	}
	return cmdmain.OK
}

// fetchSelection reads a profile store's selection (pyroscope://...) as
// an encoded profile.
func fetchSelection(addr string, a *storeaccess.Access) (io.ReadCloser, error) {
	p, err := profstore.FetchAddress(context.Background(), a, addr)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		return nil, err
	}
	return io.NopCloser(&b), nil
}

func readInputs(paths []string, opt Options, isDiff bool) (*Tree, error) {
	open := func(p string) (io.ReadCloser, error) {
		if p == "-" {
			return os.Stdin, nil
		}
		if profstore.IsSelection(p) {
			return fetchSelection(p, opt.access)
		}
		// A FIFO or a device is refused before it is opened: a FIFO's
		// open() waits for a writer, deaf to Ctrl-C ("-" reads stdin).
		f, err := limits.OpenRegular(p)
		if err != nil {
			if st, serr := os.Stat(p); serr == nil && st.IsDir() {
				return nil, fmt.Errorf("%s is a folder: want a profile or folded stacks", p)
			}
			return nil, err
		}
		if opt.Route == "" {
			return f, nil
		}
		defer f.Close()
		return selectRoute(p, f, opt)
	}
	f, err := open(paths[0])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !isDiff {
		t, err := Read(f, opt)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", paths[0], err)
		}
		return t, nil
	}
	g, err := open(paths[1])
	if err != nil {
		return nil, err
	}
	defer g.Close()
	t, err := ReadDiff(f, g, opt)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", paths[0], paths[1], err)
	}
	return t, nil
}

// selectRoute reads a profile whole and keeps one route's samples
// (Options.Route), as an encoded profile to read on.
func selectRoute(name string, r io.Reader, opt Options) (io.ReadCloser, error) {
	raw, err := limits.ReadAll(r, opt.maxBytes(), "the profile", "-max-profile-size")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	b, err := limits.Inflate(raw, opt.maxBytes(), "-max-profile-size")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p, err := profile.ParseData(b)
	if err != nil {
		return nil, fmt.Errorf("%s: -route wants a pprof profile: %w", name, err)
	}
	if err := profkey.SelectRoute(p, opt.Route); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := p.WriteUncompressed(&buf); err != nil {
		return nil, err
	}
	return io.NopCloser(&buf), nil
}
