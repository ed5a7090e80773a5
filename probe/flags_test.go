package probe

import (
	"encoding/pem"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/internal/withagent"
	"github.com/perfspy/perfspy/profstore"
)

// flagNames are the flags a command's -h lists.
func flagNames(t *testing.T, usage string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  -([\w-]+)`).FindAllStringSubmatch(usage, -1) {
		out = append(out, m[1])
	}
	if len(out) < 10 {
		t.Fatalf("-h listed %d flags:\n%s", len(out), usage)
	}
	return out
}

// landing is one flag set to a value that is not its default, and where
// the mode reads it.
type landing struct {
	args  []string
	check func(c Config, o cliOptions) bool
}

// runLandings: every flag of probe run, and the Config (or the bench
// options) field it lands in.
func runLandings(t *testing.T) map[string]landing {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("GET /a\n"), 0o600)
	protoFile := filepath.Join(dir, "x.proto")
	os.WriteFile(protoFile, []byte("syntax = \"proto3\";\n"), 0o600)
	// -cacert is read before the build: a real certificate.
	srv := httptest.NewTLSServer(nil)
	srv.Close()
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	t.Setenv(profstore.EnvToken, "")
	return map[string]landing{
		"q":                  {[]string{"-q"}, func(c Config, o cliOptions) bool { return o.quiet }},
		"args":               {[]string{"-args", "-x 1"}, func(c Config, o cliOptions) bool { return slices.Equal(c.Args, []string{"-x", "1"}) }},
		"addr":               {[]string{"-addr", "127.0.0.1:9"}, func(c Config, o cliOptions) bool { return c.Addr == "127.0.0.1:9" }},
		"path":               {[]string{"-path", "/p"}, func(c Config, o cliOptions) bool { return c.Path == "/p" }},
		"method":             {[]string{"-method", "POST"}, func(c Config, o cliOptions) bool { return c.Method == "POST" }},
		"data":               {[]string{"-data", `{"a":1}`}, func(c Config, o cliOptions) bool { return string(c.Data) == `{"a":1}` }},
		"proto-file":         {[]string{"-proto-file", protoFile}, func(c Config, o cliOptions) bool { return slices.Equal(c.ProtoFiles, []string{protoFile}) }},
		"import-path":        {[]string{"-import-path", dir}, func(c Config, o cliOptions) bool { return slices.Equal(c.ImportPaths, []string{dir}) }},
		"cacert":             {[]string{"-cacert", caFile}, func(c Config, o cliOptions) bool { return c.CACert == caFile }},
		"insecure":           {[]string{"-insecure"}, func(c Config, o cliOptions) bool { return c.Insecure }},
		"push":               {[]string{"-push", "http://127.0.0.1:4040"}, func(c Config, o cliOptions) bool { return c.Push.URL == "http://127.0.0.1:4040" }},
		"label":              {[]string{"-label", "team=x"}, func(c Config, o cliOptions) bool { return c.Push.Labels["team"] == "x" }},
		"push-required":      {[]string{"-push-required"}, func(c Config, o cliOptions) bool { return c.Push.Required }},
		"push-header":        {[]string{"-push-header", "X-Scope-OrgID=t"}, func(c Config, o cliOptions) bool { return c.Push.Access.Headers["X-Scope-Orgid"] == "t" }},
		"push-cacert":        {[]string{"-push-cacert", "ca.pem"}, func(c Config, o cliOptions) bool { return c.Push.Access.CACert == "ca.pem" }},
		"push-timeout":       {[]string{"-push-timeout", "3s"}, func(c Config, o cliOptions) bool { return c.Push.Access.Timeout == 3*time.Second }},
		"store-max-response": {[]string{"-store-max-response", "7"}, func(c Config, o cliOptions) bool { return c.Push.Access.MaxResponse == 7 }},
		"body":               {[]string{"-body", file}, func(c Config, o cliOptions) bool { return string(c.Body) == "GET /a\n" }},
		"max-body":           {[]string{"-max-body", "3", "-body", file}, nil}, // read: the body is over it (TestRefusedBeforeBuild)
		"results-mode":       {[]string{"-results-mode", "0750"}, func(c Config, o cliOptions) bool { return c.ResultsMode == 0o750 }},
		"conns":              {[]string{"-conns", "3"}, func(c Config, o cliOptions) bool { return c.Conns == 3 }},
		"rate":               {[]string{"-rate", "2500"}, func(c Config, o cliOptions) bool { return c.Arrivals.Rate == 2500 && !c.Arrivals.Poisson }},
		"rate-steps":         {[]string{"-rate-steps", "100,200"}, func(c Config, o cliOptions) bool { return slices.Equal(o.rateSteps, []float64{100, 200}) }},
		"arrivals":           {[]string{"-rate", "10", "-arrivals", "poisson"}, func(c Config, o cliOptions) bool { return c.Arrivals.Poisson }},
		"proto":              {[]string{"-proto", "h2c"}, func(c Config, o cliOptions) bool { return c.Proto == "h2c" }},
		"http-driver":        {[]string{"-http-driver", "nethttp"}, func(c Config, o cliOptions) bool { return c.HTTPDriver == "nethttp" }},
		"grpc-driver":        {[]string{"-grpc-driver", "grpcgo"}, func(c Config, o cliOptions) bool { return c.GRPCDriver == "grpcgo" }},
		"body-size":          {[]string{"-body-size", "5"}, func(c Config, o cliOptions) bool { return c.BodySize == 5 }},
		"size":               {[]string{"-size", "4096"}, func(c Config, o cliOptions) bool { return c.Size == 4096 }},
		"streams":            {[]string{"-streams", "4"}, func(c Config, o cliOptions) bool { return c.Streams == 4 }},
		"pkt":                {[]string{"-pkt", "1400"}, func(c Config, o cliOptions) bool { return c.Pkt == 1400 }},
		"env":                {[]string{"-env", "A=1"}, func(c Config, o cliOptions) bool { return slices.Equal(c.Env, []string{"A=1"}) }},
		"header":             {[]string{"-header", "K: v"}, func(c Config, o cliOptions) bool { return c.Headers["K"] == "v" }},
		"warmup":             {[]string{"-warmup", "2s"}, func(c Config, o cliOptions) bool { return c.Warmup == 2*time.Second }},
		"duration":           {[]string{"-duration", "3s"}, func(c Config, o cliOptions) bool { return c.Duration == 3*time.Second }},
		"exact-duration":     {[]string{"-exact-duration", "1s"}, func(c Config, o cliOptions) bool { return c.ExactDuration == time.Second }},
		"judge":              {[]string{"-judge", "counts"}, func(c Config, o cliOptions) bool { return c.Judge == "counts" }},
		"cpus":               {[]string{"-cpus", "none"}, func(c Config, o cliOptions) bool { return c.CPUs == "none" }},
		"out":                {[]string{"-out", filepath.Join(dir, "new")}, func(c Config, o cliOptions) bool { return c.Out == filepath.Join(dir, "new") }},
		"ready-timeout":      {[]string{"-ready-timeout", "9s"}, func(c Config, o cliOptions) bool { return c.ReadyTimeout == 9*time.Second }},
		"allocs":             {[]string{"-allocs", "heapprofile"}, func(c Config, o cliOptions) bool { return c.Allocs == "heapprofile" }},
		"instructions":       {[]string{"-instructions"}, func(c Config, o cliOptions) bool { return c.Instructions }},
		"live":               {[]string{"-instructions", "-live"}, func(c Config, o cliOptions) bool { return c.Live && c.Instructions }},
		"alone":              {[]string{"-alone"}, func(c Config, o cliOptions) bool { return c.Alone }},
		"max-routes":         {[]string{"-max-routes", "7"}, func(c Config, o cliOptions) bool { return c.MaxRoutes == 7 }},
		"sample":             {[]string{"-sample", "16"}, func(c Config, o cliOptions) bool { return c.Sample == 16 }},
		"requests":           {[]string{"-requests", file}, func(c Config, o cliOptions) bool { return c.RequestFile == file && len(c.Mix) == 1 }},
		"floor":              {[]string{"-floor"}, func(c Config, o cliOptions) bool { return c.Floor }},
		"offcpu":             {[]string{"-offcpu=false"}, func(c Config, o cliOptions) bool { return !c.OffCPU }},
		"wallclock":          {[]string{"-wallclock=false"}, func(c Config, o cliOptions) bool { return !c.Wallclock }},
		"retained":           {[]string{"-retained=false"}, func(c Config, o cliOptions) bool { return !c.Retained }},
		"bills":              {[]string{"-bills=false"}, func(c Config, o cliOptions) bool { return c.NoBills }},
		"fgprof-only":        {[]string{"-fgprof-only"}, func(c Config, o cliOptions) bool { return c.FgprofOnly }},
		"syscalls":           {[]string{"-syscalls", "proc-io"}, func(c Config, o cliOptions) bool { return c.Syscalls == "proc-io" }},
		"copies":             {[]string{"-copies", "off"}, func(c Config, o cliOptions) bool { return c.Copies == "off" }},
		"min-requests":       {[]string{"-min-requests", "7"}, func(c Config, o cliOptions) bool { return c.MinRequests == 7 }},
		"bench":              {[]string{"-bench", "X"}, func(c Config, o cliOptions) bool { return o.bench.Bench == "X" && o.bench.Target == c.Target }},
		"benchtime":          {[]string{"-bench", ".", "-benchtime", "5x"}, func(c Config, o cliOptions) bool { return o.bench.BenchTime == "5x" }},
		"bench-timeout":      {[]string{"-bench", ".", "-bench-timeout", "5s"}, func(c Config, o cliOptions) bool { return o.bench.Timeout == 5*time.Second }},
		"count":              {[]string{"-bench", ".", "-count", "3"}, func(c Config, o cliOptions) bool { return o.bench.Count == 3 }},
		"exec": {[]string{"-bench", ".", "-exec", "qemu-aarch64-static -L /x"}, func(c Config, o cliOptions) bool {
			return slices.Equal(o.bench.Exec, []string{"qemu-aarch64-static", "-L", "/x"})
		}},
	}
}

// TestRunFlagsLand: every flag probe run lists lands in the field its
// mode reads (a flag added without a landing here fails). Seen failing
// first on a planted flag.
func TestRunFlagsLand(t *testing.T) {
	planted := func(fs *flag.FlagSet) { fs.Bool("planted", false, "a flag nothing reads") }
	if got := unlanded(t, planted); !slices.Equal(got, []string{"-planted: no landing in this test: say where the flag is read"}) {
		t.Fatalf("with a planted flag: %q", got)
	}
	for _, e := range unlanded(t, nil) {
		t.Error(e)
	}
}

// unlanded lists the flags of probe run (with extra's) that have no
// landing, or do not land where it says.
func unlanded(t *testing.T, extra func(*flag.FlagSet)) []string {
	var usage strings.Builder
	parseRunFlags("probe run", []string{"-h"}, &usage, extra)
	lands := runLandings(t)
	var errs []string
	for _, name := range flagNames(t, usage.String()) {
		l, ok := lands[name]
		if !ok {
			errs = append(errs, fmt.Sprintf("-%s: no landing in this test: say where the flag is read", name))
			continue
		}
		if l.check == nil {
			continue
		}
		var stderr strings.Builder
		cfg, opt, code, ok := parseRunFlags("probe run", append(l.args, "./targets/httpjson"), &stderr, extra)
		if !ok {
			errs = append(errs, fmt.Sprintf("-%s: exit %d: %s", name, code, stderr.String()))
			continue
		}
		if !l.check(cfg, opt) {
			errs = append(errs, fmt.Sprintf("-%s %v did not land", name, l.args))
		}
	}
	return errs
}

// TestABBulkFlagsLand: the flags of probe ab and probe bulk of their own
// land in their options; the run's flags reach ab.Run and sw.Run.
func TestABBulkFlagsLand(t *testing.T) {
	var stderr strings.Builder
	ab, _, code, ok := parseABFlags([]string{"-before", "b", "-after", "a", "-repo", "r", "-rounds", "6", "-control", "/c", "-top", "3",
		"-max-regress", "allocs/req=1", "-conns", "2", "./targets/httpjson"}, &stderr)
	if !ok {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if ab.Before != "b" || ab.After != "a" || ab.Repo != "r" || ab.Rounds != 6 || ab.Control != "/c" || ab.Top != 3 ||
		ab.MaxRegress["allocs/req"] != 1 || ab.Run.Conns != 2 || ab.Bench.Bench != "" {
		t.Errorf("ab options %+v", ab)
	}
	ab, _, _, ok = parseABFlags([]string{"-before", "b", "-after", "a", "-bench", "X", "-count", "2", "-max-regress", "allocs/op=1", "./lib"}, &stderr)
	if !ok || ab.Bench.Bench != "X" || ab.Bench.Count != 2 || ab.Bench.Target != "./lib" {
		t.Errorf("ab -bench options %+v", ab.Bench)
	}
	sw, _, code, ok := parseBulkFlags([]string{"-sizes", "1K,2M", "-rounds", "4", "-size", "100", "./targets/quicecho"}, &stderr)
	if !ok {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !slices.Equal(sw.Sizes, []int64{1 << 10, 2 << 20}) || sw.Rounds != 4 || sw.Run.Size != 100 || sw.Run.Duration != 2*time.Second {
		t.Errorf("bulk options %+v", sw)
	}
}

// TestConfigFlags: a configuration a program made (probe review's) records
// in meta the flags that would give it: those off their defaults, a
// credential redacted, nothing at its default.
func TestConfigFlags(t *testing.T) {
	ab, err := NewABConfig("./targets/httpjson", "")
	if err != nil {
		t.Fatal(err)
	}
	c := ab.Run
	c.Duration, c.Conns = 7*time.Second, 4
	c.Push.URL = "https://user:secret@store.example/x"
	got := strings.Join(configFlags(c), " ")
	for _, want := range []string{"-duration=7s", "-conns=4", "-push=https://REDACTED@store.example/x"} {
		if !strings.Contains(got, want) {
			t.Errorf("flags %q lack %s", got, want)
		}
	}
	for _, not := range []string{"secret", "-method=", "-warmup=", "-offcpu="} {
		if strings.Contains(got, not) {
			t.Errorf("flags %q hold %s", got, not)
		}
	}
	c.Flags = []string{"-duration=3s"}
	if m := collectMeta(c, &withagent.Binary{}, "", &wire.Response{}, proc.CPUPlan{}, nil); m["flags"] != "-duration=3s" {
		t.Errorf("parsed flags are recorded as given: %q", m["flags"])
	}
}

// TestDefaultsAreTheFlags: DefaultConfig, DefaultBenchConfig and
// NewABConfig give what the command's flags give when none is set, so
// that a program driving probe (probe review) measures as the command
// does, with no flag strings parsed.
func TestDefaultsAreTheFlags(t *testing.T) {
	for _, bench := range []string{"", "Encode"} {
		args := []string{"-before", "HEAD", "-after", "HEAD"}
		if bench != "" {
			args = append(args, "-bench", bench)
		}
		flags, err := ABConfigFromArgs(append(args, "./targets/httpjson"))
		if err != nil {
			t.Fatal(err)
		}
		flags.Before, flags.After, flags.Run.Flags, flags.Bench.Flags = "", "", nil, nil
		if bench == "" {
			flags.Bench = BenchConfig{} // read by -bench only
		}
		typed, err := NewABConfig("./targets/httpjson", bench)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(typed, flags) {
			t.Errorf("-bench %q: NewABConfig\n%+v\nthe flags\n%+v", bench, typed, flags)
		}
	}
	var cfg Config
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	defineRunFlags(fs, &cfg, &cliOptions{})
	if d := DefaultConfig(); !reflect.DeepEqual(cfg, d) {
		t.Errorf("DefaultConfig\n%+v\nthe flags' defaults\n%+v", d, cfg)
	}
}
