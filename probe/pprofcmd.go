package probe

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/internal/cmdmain"
	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/profkey"
)

// mainPprof is probe pprof: a profile of a run, one route's or the
// window's, divided per request, for go tool pprof to read as it is.
func mainPprof(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe pprof", flag.ContinueOnError)
	fs.SetOutput(stderr)
	route := fs.String("route", "", "keep this `route`'s samples (a route of summary.json's routes, \"(before routing)\", or \"background\"), divided by its requests")
	per := fs.Int64("per", 1, "values per `N` requests (1: per request; 1000 keeps three more digits of a figure below 1 a request)")
	out := fs.String("o", "", "the profile to write (default: beside the input, named for the route and -per)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: probe pprof [-route R] [-per N] [-o FILE] RESULTS_DIR[/PROFILE.pb.gz]\n\n"+
			"Writes a profile of a run whose values are per request (of the route with -route), so that\n"+
			"go tool pprof -top reads them as they are and -diff_base compares two runs of different\n"+
			"request counts. A folder means its allocs.pb.gz.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := cmdmain.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "probe pprof: want one results folder or profile")
		fs.Usage()
		return ExitUsage
	}
	if *per <= 0 {
		fmt.Fprintf(stderr, "probe pprof: -per %d: want 1 or more requests\n", *per)
		return ExitUsage
	}
	written, err := perRequestProfile(fs.Arg(0), *route, *per, *out)
	if err != nil {
		fmt.Fprintf(stderr, "probe pprof: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "%s\n  go tool pprof -top %s\n", written, written)
	return ExitOK
}

// perRequestProfile writes in's profile (a folder: its allocs.pb.gz),
// route's samples only when route is given, divided per per requests, to
// out (default: beside in); it returns the path written.
func perRequestProfile(in, route string, per int64, out string) (string, error) {
	if route == profkey.Background {
		return "", fmt.Errorf("-route %s: the background's figures are totals of the window, per second, not per request", route)
	}
	if st, err := os.Stat(in); err == nil && st.IsDir() {
		in = filepath.Join(in, "allocs.pb.gz")
	}
	// A FIFO or a device is refused before it is opened (an open that
	// waits for a writer hears no signal), and a profile is bounded.
	raw, err := limits.ReadFile(in, limits.Profile, "")
	if err != nil {
		return "", err
	}
	b, err := limits.Inflate(raw, limits.Profile, "")
	if err != nil {
		return "", fmt.Errorf("%s: %w", in, err)
	}
	p, err := profile.ParseData(b)
	if err != nil {
		return "", fmt.Errorf("parsing %s: %w", in, err)
	}
	if route != "" {
		if err := profkey.SelectRoute(p, route); err != nil {
			return "", fmt.Errorf("%s: %w", in, err)
		}
	}
	if err := profkey.ScalePerRequest(p, per); err != nil {
		return "", fmt.Errorf("%s: %w", in, err)
	}
	if out == "" {
		out = perRequestName(in, route, per)
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("-o %s: already exists; probe pprof never overwrites a file", out)
	}
	if err != nil {
		return "", fmt.Errorf("-o: %w", err)
	}
	if err := p.Write(f); err != nil {
		f.Close()
		os.Remove(out)
		return "", fmt.Errorf("-o %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(out)
		return "", fmt.Errorf("-o %s: %w", out, err)
	}
	return out, nil
}

// perRequestName is the default output beside in: allocs.pb.gz of route
// "GET /users/{id}" per 1 is allocs.GET_users_id.per-req.pb.gz.
func perRequestName(in, route string, per int64) string {
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(in), ".gz"), ".pb")
	var b strings.Builder
	b.WriteString(base)
	if route != "" {
		b.WriteByte('.')
		under := false
		for _, r := range route {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
			switch {
			case ok:
				b.WriteRune(r)
				under = false
			case !under && b.Len() > len(base)+1:
				b.WriteByte('_')
				under = true
			}
		}
	}
	if per == 1 {
		b.WriteString(".per-req.pb.gz")
	} else {
		b.WriteString(".per-" + strconv.FormatInt(per, 10) + "-req.pb.gz")
	}
	return filepath.Join(filepath.Dir(in), strings.Replace(b.String(), "_.per", ".per", 1))
}
