package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/perfspy/perfspy/profkey"
	"github.com/perfspy/perfspy/profstore"
)

// PushConfig sends a run's profiles to a Pyroscope server (-push).
type PushConfig struct {
	URL      string            // http://HOST:PORT
	Labels   map[string]string // -label k=v, added to the run's own
	Required bool              // a failed push fails the command
}

// ErrPush is a push that failed; the results on disk are kept.
var ErrPush = errors.New("push to the profile store failed")

// endpointLabel is what a run measured: the request file, the RPC
// (a method with a slash, as driverProto takes it), or the path.
func endpointLabel(cfg Config) string {
	switch {
	case cfg.RequestFile != "":
		return filepath.Base(cfg.RequestFile)
	case strings.Contains(cfg.Method, "/"):
		return cfg.Method
	}
	return cfg.Path
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
func pushProfiles(ctx context.Context, pc PushConfig, dir string, s *Summary, extra map[string]string) error {
	host, _ := os.Hostname()
	labels := map[string]string{"commit": s.Commit, "go": s.Go, "host": host, "verdict": s.Verdict, "goarch": runtime.GOARCH}
	for k, v := range extra {
		labels[k] = v
	}
	for k, v := range pc.Labels {
		labels[profstore.LabelName(k)] = v
	}
	// A versioned target's service is its program; the version is its
	// commit label.
	service, _, _ := strings.Cut(filepath.Base(s.Target), "@")
	var names []string
	for k, f := range s.Files {
		if filepath.Ext(f) == ".gz" && filepath.Ext(f[:len(f)-3]) == ".pb" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	until := time.Now()
	from := until.Add(-time.Duration(s.Window.Seconds * float64(time.Second)))
	var errs []error
	for _, k := range names {
		p, err := readProfile(filepath.Join(dir, s.Files[k]))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		u := profstore.Upload{Base: pc.URL, Name: StoreName(k), Service: service, Labels: labels, Requests: profkey.Requests(p), From: from, Until: until}
		if err := profstore.Push(ctx, u, p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Files[k], err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (%s): %w", ErrPush, pc.URL, errors.Join(errs...))
	}
	return nil
}
