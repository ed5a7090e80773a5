package review

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/metric"
)

// ConfigFile is the configuration's name at the repository's root.
const ConfigFile = ".perfspy.yml"

// Config is .perfspy.yml: what a review measures and the gates it applies.
type Config struct {
	Servers    []Server
	Benchmarks []Benchmark
	// Gates are each metric's allowed growth in percent. A count the file
	// does not name (allocs/req, B/req, copied-B/req, retained-B/req,
	// goroutines-left/req and the /op ones) is gated at 0; a timing it
	// does not name is reported, not gated.
	Gates map[string]float64
	// Rounds, Warmup and Duration are probe ab's, for every server and
	// benchmark that does not set its own (0: probe ab's defaults).
	Rounds           int
	Warmup, Duration time.Duration
	path             string
	hash             string // of the file's bytes, for the cache
}

// Server is one server to measure, as probe ab takes it.
type Server struct {
	Name     string
	Target   string // a main package's folder, relative to the repository's root
	Requests string // a request file, relative to the root
	Path     string
	Proto    string
	Method   string
	Data     string
	Args     string
	Conns    int
	Rounds   int
	Warmup   time.Duration
	Duration time.Duration
	line     int
}

// Benchmark is one package's Go benchmarks to measure.
type Benchmark struct {
	Package   string // relative to the repository's root
	Bench     string
	BenchTime string
	Count     int
	Rounds    int
	// Instructions counts each benchmark's instructions per op under
	// callgrind too (probe run -bench -instructions): a CPU figure a
	// shared runner's noise does not move, gated as instructions/op.
	Instructions bool
	line         int
}

// gateable are the metrics a gate may name: those probe ab compares, a
// server's (per request) and a benchmark's (per op).
var gateable = append(metric.Compare("req"), metric.Compare("op")...)

// IsCount reports whether name is a metric the metric table judges as an
// exact count (gated at 0 unless the configuration says otherwise).
func IsCount(name string) bool {
	m, ok := metric.Lookup(name)
	return ok && m.Judged.Counted() && slices.Contains(gateable, name[strings.LastIndex(name, " ")+1:])
}

// ConfigError is a configuration the review refuses: the file, the line and
// what is wrong.
type ConfigError struct {
	File string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// LoadConfig reads and checks path; root is the repository the paths in it
// are relative to. Every error is a *ConfigError.
func LoadConfig(path, root string) (*Config, error) {
	// The file is the head's: a committed link must not make the review
	// read (and print in its errors) a file outside the repository.
	if rel, err := filepath.Rel(root, path); err == nil && !filepath.IsAbs(rel) && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		if err := inside(root, rel); err != nil {
			return nil, &ConfigError{File: path, Msg: "the configuration: a symbolic link leads outside the repository"}
		}
	}
	data, err := readConfig(path)
	if err != nil {
		return nil, &ConfigError{File: path, Msg: err.Error()}
	}
	c, err := parseConfig(path, data)
	if err != nil {
		return nil, err
	}
	if err := c.check(root); err != nil {
		return nil, err
	}
	return c, nil
}

// MaxConfig is the most bytes a configuration may hold: it is a short
// list of servers and benchmarks, and the head of a pull request writes it.
const MaxConfig = 1 << 20

// readConfig reads path, refusing more than MaxConfig bytes unread.
func readConfig(path string) ([]byte, error) {
	f, err := limits.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxConfig+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxConfig {
		return nil, fmt.Errorf("over %d bytes: a configuration is a short list of servers and benchmarks", MaxConfig)
	}
	return data, nil
}

// inside checks that rel, a path of the configuration, stays in root with
// its symbolic links followed: the head of a pull request writes the file
// and may commit links, and nothing outside its worktree is measured or
// read. A path that does not exist is left to the checks that follow.
func inside(root, rel string) error {
	if filepath.IsAbs(rel) {
		return fmt.Errorf("%s: an absolute path (paths are relative to the repository's root)", rel)
	}
	if r, err := filepath.Rel(root, filepath.Join(root, rel)); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s: outside the repository", rel)
	}
	if _, err := limits.Inside(root, rel); errors.Is(err, limits.ErrOutside) {
		return fmt.Errorf("%s: a symbolic link leads outside the repository", rel)
	}
	return nil // a path that is not there is left to the checks that follow
}

// parseConfig decodes the YAML, refusing unknown keys and values of the
// wrong kind with their line.
func parseConfig(path string, data []byte) (*Config, error) {
	p := &parser{file: path}
	c := &Config{path: path, hash: fmt.Sprintf("%x", sha256.Sum256(data))}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{File: path, Msg: "empty: want servers:, benchmarks: or both"}
		}
		return nil, &ConfigError{File: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	root := doc.Content[0]
	err := p.mapping(root, "the file", map[string]func(*yaml.Node) error{
		"servers": func(n *yaml.Node) error {
			return p.list(n, "servers", func(i int, n *yaml.Node) error { return p.server(c, i, n) })
		},
		"benchmarks": func(n *yaml.Node) error {
			return p.list(n, "benchmarks", func(i int, n *yaml.Node) error { return p.benchmark(c, i, n) })
		},
		"gates":    func(n *yaml.Node) error { return p.gates(c, n) },
		"rounds":   func(n *yaml.Node) error { return p.int(n, "rounds", &c.Rounds) },
		"warmup":   func(n *yaml.Node) error { return p.duration(n, "warmup", &c.Warmup) },
		"duration": func(n *yaml.Node) error { return p.duration(n, "duration", &c.Duration) },
	})
	if err != nil {
		return nil, err
	}
	if len(c.Servers) == 0 && len(c.Benchmarks) == 0 {
		return nil, &ConfigError{File: path, Line: root.Line, Msg: "nothing to measure: want servers:, benchmarks: or both"}
	}
	return c, nil
}

type parser struct{ file string }

func (p *parser) errorf(n *yaml.Node, format string, a ...any) error {
	return &ConfigError{File: p.file, Line: n.Line, Msg: fmt.Sprintf(format, a...)}
}

// mapping calls each key's function; an unknown key is an error that lists
// the known ones.
func (p *parser) mapping(n *yaml.Node, where string, keys map[string]func(*yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, "%s: want a mapping of keys", where)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := keys[k.Value]
		if !ok {
			known := make([]string, 0, len(keys))
			for name := range keys {
				known = append(known, name)
			}
			slices.Sort(known)
			return p.errorf(k, "unknown key %q in %s (known: %s)", k.Value, where, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return p.errorf(k, "key %q given twice in %s", k.Value, where)
		}
		seen[k.Value] = true
		if err := f(v); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) list(n *yaml.Node, key string, each func(int, *yaml.Node) error) error {
	if n.Kind != yaml.SequenceNode {
		return p.errorf(n, "%s: want a list", key)
	}
	for i, e := range n.Content {
		if err := each(i, e); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) str(n *yaml.Node, key string, dst *string) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return p.errorf(n, "%s: want a string", key)
	}
	*dst = n.Value
	return nil
}

func (p *parser) bool(n *yaml.Node, key string, dst *bool) error {
	v, err := strconv.ParseBool(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || n.Tag != "!!bool" {
		return p.errorf(n, "%s: want true or false, not %q", key, n.Value)
	}
	*dst = v
	return nil
}

func (p *parser) int(n *yaml.Node, key string, dst *int) error {
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v <= 0 {
		return p.errorf(n, "%s: want a positive whole number, not %q", key, n.Value)
	}
	*dst = v
	return nil
}

func (p *parser) duration(n *yaml.Node, key string, dst *time.Duration) error {
	d, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || d <= 0 {
		return p.errorf(n, "%s: want a duration like 2s or 500ms, not %q", key, n.Value)
	}
	*dst = d
	return nil
}

func (p *parser) server(c *Config, i int, n *yaml.Node) error {
	s := Server{line: n.Line}
	where := fmt.Sprintf("servers[%d]", i)
	err := p.mapping(n, where, map[string]func(*yaml.Node) error{
		"name":     func(v *yaml.Node) error { return p.str(v, "name", &s.Name) },
		"target":   func(v *yaml.Node) error { return p.str(v, "target", &s.Target) },
		"requests": func(v *yaml.Node) error { return p.str(v, "requests", &s.Requests) },
		"path":     func(v *yaml.Node) error { return p.str(v, "path", &s.Path) },
		"proto":    func(v *yaml.Node) error { return p.str(v, "proto", &s.Proto) },
		"method":   func(v *yaml.Node) error { return p.str(v, "method", &s.Method) },
		"data":     func(v *yaml.Node) error { return p.str(v, "data", &s.Data) },
		"args":     func(v *yaml.Node) error { return p.str(v, "args", &s.Args) },
		"conns":    func(v *yaml.Node) error { return p.int(v, "conns", &s.Conns) },
		"rounds":   func(v *yaml.Node) error { return p.int(v, "rounds", &s.Rounds) },
		"warmup":   func(v *yaml.Node) error { return p.duration(v, "warmup", &s.Warmup) },
		"duration": func(v *yaml.Node) error { return p.duration(v, "duration", &s.Duration) },
	})
	if err != nil {
		return err
	}
	switch {
	case s.Target == "":
		return p.errorf(n, "%s: target is required (a main package's folder, as probe run takes it)", where)
	case s.Requests != "" && s.Path != "":
		return p.errorf(n, "%s: requests and path: give one", where)
	}
	if s.Name == "" {
		s.Name = filepath.Base(s.Target)
	}
	for _, o := range c.Servers {
		if o.Name == s.Name {
			return p.errorf(n, "%s: a second server named %q (name: tells them apart)", where, s.Name)
		}
	}
	c.Servers = append(c.Servers, s)
	return nil
}

func (p *parser) benchmark(c *Config, i int, n *yaml.Node) error {
	b := Benchmark{line: n.Line}
	where := fmt.Sprintf("benchmarks[%d]", i)
	var benchNode *yaml.Node
	err := p.mapping(n, where, map[string]func(*yaml.Node) error{
		"package":   func(v *yaml.Node) error { return p.str(v, "package", &b.Package) },
		"bench":     func(v *yaml.Node) error { benchNode = v; return p.str(v, "bench", &b.Bench) },
		"benchtime": func(v *yaml.Node) error { return p.str(v, "benchtime", &b.BenchTime) },
		"count":     func(v *yaml.Node) error { return p.int(v, "count", &b.Count) },
		"rounds":    func(v *yaml.Node) error { return p.int(v, "rounds", &b.Rounds) },
		"instructions": func(v *yaml.Node) error {
			return p.bool(v, "instructions", &b.Instructions)
		},
	})
	if err != nil {
		return err
	}
	if b.Package == "" {
		return p.errorf(n, "%s: package is required", where)
	}
	if b.Bench == "" {
		b.Bench = "."
	} else if _, err := regexp.Compile(b.Bench); err != nil {
		return p.errorf(benchNode, "%s: bench: %v", where, err)
	}
	c.Benchmarks = append(c.Benchmarks, b)
	return nil
}

func (p *parser) gates(c *Config, n *yaml.Node) error {
	c.Gates = map[string]float64{}
	keys := map[string]func(*yaml.Node) error{}
	for _, m := range gateable {
		keys[m] = func(v *yaml.Node) error {
			pct, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v.Value, "%")), 64)
			if v.Kind != yaml.ScalarNode || err != nil || pct < 0 {
				return p.errorf(v, "gates: %s: want an allowed growth like 0%% or 1.5%%, not %q", m, v.Value)
			}
			c.Gates[m] = pct
			return nil
		}
	}
	return p.mapping(n, "gates (a metric's allowed growth)", keys)
}

// check looks for what the paths name, before anything is built.
func (c *Config) check(root string) error {
	isPkg := func(dir string) bool {
		ents, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			return false
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".go") {
				return true
			}
		}
		return false
	}
	for _, s := range c.Servers {
		paths := []string{s.Target, s.Requests}
		if f, ok := strings.CutPrefix(s.Data, "@"); ok {
			paths = append(paths, f) // data is a path with @ only
		}
		for _, p := range paths {
			if p == "" {
				continue
			}
			if err := inside(root, p); err != nil {
				return &ConfigError{File: c.path, Line: s.line, Msg: fmt.Sprintf("server %s: %v", s.Name, err)}
			}
		}
		if !isPkg(s.Target) {
			return &ConfigError{File: c.path, Line: s.line, Msg: fmt.Sprintf("server %s: target %s: no Go package there (paths are relative to %s)", s.Name, s.Target, root)}
		}
		if s.Requests != "" {
			if _, err := os.Stat(filepath.Join(root, s.Requests)); err != nil {
				return &ConfigError{File: c.path, Line: s.line, Msg: fmt.Sprintf("server %s: requests %s: %v", s.Name, s.Requests, errors.Unwrap(err))}
			}
		}
	}
	for _, b := range c.Benchmarks {
		if err := inside(root, b.Package); err != nil {
			return &ConfigError{File: c.path, Line: b.line, Msg: fmt.Sprintf("benchmarks: %v", err)}
		}
		if !isPkg(b.Package) {
			return &ConfigError{File: c.path, Line: b.line, Msg: fmt.Sprintf("benchmarks: package %s: no Go package there (paths are relative to %s)", b.Package, root)}
		}
	}
	return nil
}

// Gate is a metric's allowed growth in percent, and whether it is gated.
func (c *Config) Gate(metric string) (pct float64, gated bool) {
	if v, ok := c.Gates[metric]; ok {
		return v, true
	}
	return 0, IsCount(metric)
}
