package routes

import (
	_ "embed"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/agent/wire"
	"github.com/perfspy/perfspy/profkey"
)

//go:embed nethttp/zz_perfspy_request.go.txt
var httpGo string

//go:embed fold.go
var foldGo string

// SelfFiles are the files added to net/http beside HTTPFile that tell a
// connection from the process itself (perfspyOwnPeer), by name.
var SelfFiles = map[string]string{"zz_perfspy_self_linux.go": selfLinux, "zz_perfspy_self_other.go": selfOther}

//go:embed nethttp/zz_perfspy_self_linux.go.txt
var selfLinux string

//go:embed nethttp/zz_perfspy_self_other.go.txt
var selfOther string

// TraceCategory is the category of the execution trace's log event that
// names a request's route, inside its region (the off-CPU window).
const TraceCategory = "perfspy.route"

// HTTPFileName is the file HTTPFile is added to net/http as.
const HTTPFileName = "zz_perfspy_request.go"

// HTTPFile returns the file added to net/http: perfspyRequest.Begin and its
// End, which mark a request's goroutine with its route and open the
// off-CPU window's trace region of type regionType; perfspyRouted, which
// the ServeMux calls once it has matched a pattern; and the folding of
// paths (fold.go, as it is).
func HTTPFile(regionType string) string {
	_, fold, _ := strings.Cut(foldGo, "package routes\n")
	text := strings.NewReplacer("REGIONTYPE", regionType, "BEFOREROUTING", profkey.BeforeRouting, "SELFPREFIX", profkey.SelfPrefix, "ROUTELOG", TraceCategory).Replace(httpGo)
	return envReplacer().Replace(text) + fold
}

// sampleFunc is perfspySample in each overlay that marks requests (net/http,
// runtime/pprof): wire.SampleN, read once at start.
const sampleFunc = `// perfspySample is N of SAMPLEENV: one request in N of each route is
// sampled, the first of each period included; 0 samples none. In live
// mode (PUSHENV set, not under probe: SOCKETENV unset) it defaults to
// SAMPLEDEFAULT.
var perfspySample = func() uint64 {
	v := os.Getenv("SAMPLEENV")
	if v == "" && os.Getenv("PUSHENV") != "" && os.Getenv("SOCKETENV") == "" {
		return SAMPLEDEFAULT
	}
	n, err := strconv.ParseUint(v, 10, 31)
	if err != nil {
		return 0
	}
	return n
}()`

// envReplacer fills the overlays' templates with the environment they
// read: the sampling (sampleFunc) and the routes' cap.
func envReplacer() *strings.Replacer {
	sample := strings.NewReplacer("SAMPLEENV", wire.SampleEnv, "PUSHENV", wire.PushEnv, "SOCKETENV", wire.SocketEnv,
		"SAMPLEDEFAULT", strconv.Itoa(wire.DefaultSample)).Replace(sampleFunc)
	return strings.NewReplacer("SAMPLEFUNC", sample, "ROUTECAPENV", MaxRoutesEnv, "ROUTECAPDEFAULT", strconv.Itoa(DefaultMaxRoutes),
		"ROUTECAPMOST", strconv.Itoa(MaxRoutes))
}

// HTTPMuxEdit is the ServeMux line that calls perfspyRouted once the
// pattern is known (Go 1.22's Request.Pattern), on the same line.
var HTTPMuxEdit = [2]string{
	"\t\th, r.Pattern, r.pat, r.matches = mux.findHandler(r)\n",
	"\t\th, r.Pattern, r.pat, r.matches = mux.findHandler(r); perfspyRouted(r)\n",
}

// HTTPReadEdit marks the connection's goroutine before it reads each
// request (perfspyReading), on the same line.
var HTTPReadEdit = [2]string{
	"\t\tw, err := c.readRequest(ctx)\n",
	"\t\tperfspyReading(); w, err := c.readRequest(ctx)\n",
}

// MaxRoutesEnv is the target's environment variable that caps its
// distinct routes; DefaultMaxRoutes applies without it, and MaxRoutes is
// the most it may be (the runtime's table, less "other" and "(before
// routing)").
const (
	// SampleEnv is N when one request in N of each route is sampled
	// (the first of each period included), and the recorders count only
	// sampled requests' work (wire.SampleN).
	SampleEnv        = wire.SampleEnv
	MaxRoutesEnv     = "PERFSPY_MAX_ROUTES"
	DefaultMaxRoutes = 100
	MaxRoutes        = 1000
)
