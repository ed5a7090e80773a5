package probe

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/profstore"

	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/schema"
)

// PushConfig sends a run's profiles to a Pyroscope server (-push).
type PushConfig struct {
	URL      string             // http://HOST:PORT or https://HOST:PORT
	Labels   map[string]string  // -label k=v, added to the run's own
	Required bool               // a failed push fails the command
	Access   storeaccess.Access // headers, credentials (from the environment), limits
}

// ErrPush is a push that failed; the results on disk are kept.
var ErrPush = errors.New("push to the profile store failed")

// endpointLabel is what a run measured: the request file, the RPC
// (a method with a slash, as driverProto takes it), or the path without
// its query (which may hold a token, and would make a series a request).
func endpointLabel(cfg Config) string {
	switch {
	case cfg.RequestFile != "":
		return filepath.Base(cfg.RequestFile)
	case strings.Contains(cfg.Method, "/"):
		return cfg.Method
	}
	path, _, _ := strings.Cut(cfg.Path, "?")
	return path
}

// storeNames are the names in the store of the profiles that have one
// the store's own user interface knows; the others are perfspy_KIND.
var storeNames = map[string]string{"cpu": "process_cpu", "allocs": "memory", "block": "block", "mutex": "mutex", "wallclock": "wall"}

// StoreName is the store's name (__name__) for a run's profile of kind k
// (its key in summary.json's files): a selection's type= can be
// NAME:SAMPLE_TYPE.
func StoreName(k string) string {
	if n, ok := storeNames[k]; ok {
		return n
	}
	return "perfspy_" + k
}

// pushProfiles sends every profile of a results folder (the files the
// summary names) with the run's labels: service_name (the target),
// commit, endpoint, go, host, verdict, and the user's; arm for probe ab.
func pushProfiles(ctx context.Context, pc PushConfig, dir string, s *schema.Summary, extra map[string]string) error {
	labels := runLabels(pc, map[string]string{"commit": s.Commit, "go": s.Go, "verdict": s.Verdict}, extra)
	until := time.Now()
	from := until.Add(-time.Duration(s.Window.Seconds * float64(time.Second)))
	return pushErrors(pc, pushFiles(ctx, pc, pushSet{dir: dir, target: s.Target, files: s.Files, labels: labels, from: from, until: until}))
}

// pushBench sends each benchmark's profiles, its ops inside as the
// requests, with endpoint = the benchmark's name (as testing prints it).
func pushBench(ctx context.Context, pc PushConfig, dir string, s *schema.BenchSummary, extra map[string]string) error {
	var errs []error
	for _, b := range s.Benchmarks {
		labels := runLabels(pc, map[string]string{"commit": s.Commit, "go": s.Go, "endpoint": b.Name}, extra)
		until := time.Now()
		from := until.Add(-time.Second)
		if b.PerOp.NS != nil {
			from = until.Add(-time.Duration(*b.PerOp.NS * float64(b.N)))
		}
		errs = append(errs, pushFiles(ctx, pc, pushSet{dir: dir, target: s.Target, files: b.Files, labels: labels, from: from, until: until})...)
		if len(errs) > 0 && errors.Is(errs[len(errs)-1], profstore.ErrNoAnswer) {
			break
		}
	}
	return pushErrors(pc, errs)
}

// runLabels are a push's labels: the run's, the host's, the command's
// (extra: arm, endpoint) and the user's, in that order of precedence.
func runLabels(pc PushConfig, run, extra map[string]string) map[string]string {
	host, _ := os.Hostname()
	labels := map[string]string{"host": host, "goarch": runtime.GOARCH}
	for _, m := range []map[string]string{run, extra} {
		for k, v := range m {
			labels[k] = v
		}
	}
	for k, v := range pc.Labels {
		labels[profstore.LabelName(k)] = v
	}
	return labels
}

// pushSet is what one push sends: the profiles among files (kind ->
// path in dir) of target, with labels, covering from..until.
type pushSet struct {
	dir, target   string
	files, labels map[string]string
	from, until   time.Time
}

// pushed says whether a results folder's file of kind k goes to the
// store: its profiles, but for the bills' group profiles, whose sample
// types are the allocation and copy profiles' (a store reader asking for
// type=alloc_objects would find three).
func pushed(k, f string) bool {
	if strings.HasPrefix(k, "tail_") || strings.HasPrefix(k, "median_") {
		return false
	}
	// A benchmark's steady and once-paid allocations are views of the
	// reported run's: the store keeps that run's (allocs), one profile per
	// sample type, as a query by type names one.
	if strings.HasSuffix(k, "_steady") || strings.HasSuffix(k, "_once") {
		return false
	}
	return filepath.Ext(f) == ".gz" && filepath.Ext(f[:len(f)-3]) == ".pb"
}

// pushFiles sends the profiles among files (kind -> path in dir), each
// under its kind's store name.
func pushFiles(ctx context.Context, pc PushConfig, ps pushSet) []error {
	dir, target, files, labels, from, until := ps.dir, ps.target, ps.files, ps.labels, ps.from, ps.until
	// A versioned target's service is its program; the version is its
	// commit label.
	pkg, _, _ := strings.Cut(target, "@")
	service := withagent.ProgramName(pkg)
	var names []string
	for k, f := range files {
		if pushed(k, f) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var errs []error
	for i, k := range names {
		p, err := readProfile(filepath.Join(dir, files[k]))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		u := profstore.Upload{Base: pc.URL, Name: StoreName(k), Service: service, Labels: labels, Requests: profkey.Requests(p), From: from, Until: until}
		if err := pushRoutes(ctx, pc, u, p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", files[k], err))
			// One wait for a store that does not answer, and one refusal
			// from a store that refuses: not one per profile.
			if left := len(names) - i - 1; left > 0 {
				if errors.Is(err, profstore.ErrNoAnswer) {
					errs = append(errs, fmt.Errorf("%w: the other %d profiles were not sent", profstore.ErrNoAnswer, left))
				} else {
					errs = append(errs, fmt.Errorf("the store refused a profile: the other %d were not sent", left))
				}
			}
			break
		}
	}
	return errs
}

func pushErrors(pc PushConfig, errs []error) error {
	if len(errs) > 0 {
		return fmt.Errorf("%w (%s): %w", ErrPush, profstore.Redact(pc.URL), errors.Join(errs...))
	}
	return nil
}

// pushRoutes sends p as one series, or, when its samples carry routes
// (profkey.RouteLabel), one series per route with the label route and
// that route's requests inside: (before routing) and the background carry
// none, so that a selection of every route adds up to the window's
// requests.
func pushRoutes(ctx context.Context, pc PushConfig, u profstore.Upload, p *profile.Profile) error {
	routes := map[string]bool{}
	for _, s := range p.Sample {
		if v := s.Label[profkey.RouteLabel]; len(v) == 1 {
			routes[v[0]] = true
		}
	}
	if len(routes) == 0 {
		return profstore.Push(ctx, &pc.Access, u, p)
	}
	for _, r := range slices.Sorted(maps.Keys(routes)) {
		q := p.Copy()
		if err := profkey.SelectRoute(q, r); err != nil {
			return err
		}
		ru := u
		ru.Labels = maps.Clone(u.Labels)
		ru.Labels[profkey.RouteLabel] = r
		ru.Requests = profkey.Requests(q)
		if r == profkey.BeforeRouting {
			ru.Requests = 0
		}
		if err := profstore.Push(ctx, &pc.Access, ru, q); err != nil {
			return fmt.Errorf("route %q: %w", r, err)
		}
	}
	return nil
}
