package livepush

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/agent/wire"
)

// The live mode's environment, beside wire.PushEnv and wire.SampleEnv.
const (
	PeriodEnv  = "PERFSPY_PERIOD"  // how often the agent pushes (a Go duration)
	LabelsEnv  = "PERFSPY_LABELS"  // K=V,K=V added to every series
	ServiceEnv = "PERFSPY_SERVICE" // service_name (default: the program's name)
	// LastPushEnv=off leaves SIGTERM to the program, as a plain build has
	// it: no last push (under valgrind, a handled signal trips callgrind).
	LastPushEnv = "PERFSPY_LAST_PUSH"
)

// Defaults and bounds of live mode.
const (
	DefaultPeriod = 15 * time.Second
	MinPeriod     = time.Second
	MaxPeriod     = time.Hour
	// QueueLen bounds the periods waiting for a slow store: past it, the
	// oldest is dropped (counted, and said in the next push).
	QueueLen = 4
	// StopDeadline bounds the last push after SIGTERM.
	StopDeadline = 5 * time.Second
	// MaxPushTimeout bounds each push; a shorter period bounds it more.
	MaxPushTimeout = 30 * time.Second
)

// Config is live mode's configuration.
type Config struct {
	Push    string // http://HOST:PORT or https://HOST:PORT
	Sample  int    // one request in Sample of each route is accounted
	Period  time.Duration
	Service string
	Labels  map[string]string // every series': the user's, the build's, the host's
	Access  storeaccess.Access
	// LastPush pushes the last period on SIGTERM (LastPushEnv).
	LastPush bool
}

// FromEnv reads live mode's configuration (getenv: os.Getenv); commit,
// when probe build knew it, is the commit label's default. An error names
// the variable.
func FromEnv(getenv func(string) string, commit string) (*Config, error) {
	c := &Config{Push: strings.TrimRight(getenv(wire.PushEnv), "/"), Sample: wire.SampleN(getenv), Period: DefaultPeriod}
	if err := c.Access.FromEnv(getenv); err != nil {
		return nil, err
	}
	if err := c.Access.Check(c.Push); err != nil {
		return nil, fmt.Errorf("%s: %w", wire.PushEnv, err)
	}
	if v := getenv(wire.SampleEnv); v != "" && c.Sample <= 0 {
		return nil, fmt.Errorf("%s=%q: want N > 0 (one request in N of each route is accounted)", wire.SampleEnv, v)
	}
	if v := getenv(PeriodEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinPeriod || d > MaxPeriod {
			return nil, fmt.Errorf("%s=%q: want a duration from %s to %s", PeriodEnv, v, MinPeriod, MaxPeriod)
		}
		c.Period = d
	}
	// The agent module compiles at go 1.18 (agentmod.GoLine): no min.
	c.Access.Timeout = c.Period
	if c.Access.Timeout > MaxPushTimeout {
		c.Access.Timeout = MaxPushTimeout
	}
	switch v := getenv(LastPushEnv); v {
	case "", "on":
		c.LastPush = true
	case "off":
	default:
		return nil, fmt.Errorf("%s=%q: want on or off", LastPushEnv, v)
	}
	labels, err := parseLabels(getenv(LabelsEnv))
	if err != nil {
		return nil, err
	}
	c.Service = getenv(ServiceEnv)
	c.Labels = buildLabels(labels, c.Sample, commit)
	if c.Service == "" {
		c.Service = programName()
	}
	return c, nil
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// reserved are the labels the agent sets on each series itself.
var reserved = map[string]bool{"__name__": true, "__delta__": true, "service_name": true, "route": true}

func parseLabels(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || !labelName.MatchString(k) || reserved[k] {
			return nil, fmt.Errorf("%s: want K=V,K=V with K of letters, digits and _ (not %s), got %q", LabelsEnv, strings.Join(sortedNames(reserved), ", "), kv)
		}
		m[k] = strings.TrimSpace(val)
	}
	return m, nil
}

func sortedNames(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// buildLabels adds what the binary and the host say (commit, go, goarch,
// host, sample, source) under the user's labels, which win; the commit is
// the build info's unless probe build named one.
func buildLabels(user map[string]string, sample int, commit string) map[string]string {
	host, _ := os.Hostname()
	m := map[string]string{"go": runtime.Version(), "goarch": runtime.GOARCH, "host": host, "sample": fmt.Sprint(sample), "source": "live"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				m["commit"] = s.Value
				if len(s.Value) > 12 {
					m["commit"] = s.Value[:12]
				}
			}
		}
	}
	if commit != "" {
		m["commit"] = commit
	}
	for k, v := range user {
		m[k] = v
	}
	return m
}

// programName is the main package's last path element, as the go
// command names the binary.
func programName() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" && bi.Path != "command-line-arguments" {
		return path.Base(bi.Path)
	}
	return path.Base(os.Args[0])
}
