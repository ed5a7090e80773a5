package offcpu

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perfspy/perfspy/internal/capability"
	"github.com/perfspy/perfspy/internal/gorelease"
	"github.com/perfspy/perfspy/routes"
)

// RegionType is the execution-trace region that marks one request served
// by net/http: the overlay opens it on the handler's goroutine right before
// the handler runs and ends it once the response is written.
const RegionType = "perfspy.request"

// RouteCategory is the category of the log event, inside a request's
// region, that names its route (routes.TraceCategory).
const RouteCategory = routes.TraceCategory

// requestEdits put the boundaries into net/http:
//   - HTTP/1 ((*conn).serve): the region opens before the handler and ends
//     after finishRequest has flushed the response, or when the handler
//     hijacked the connection;
//   - HTTP/2: around the handler's call, on the stream's own goroutine
//     (h2Edits, by release).
//
// perfspyRequest.Begin costs one load when tracing is off: the
// region is only real inside the off-CPU window, whose trace is on. It
// also marks the request's goroutine with its route (package routes),
// and the ServeMux edit moves the mark to the pattern it matched.
var requestEdits = []routes.Edit{
	edit("server.go",
		"\t\tserverHandler{c.server}.ServeHTTP(w, w.req)\n",
		"\t\tvar perfspyRegion perfspyRequest; perfspyRegion.self = perfspyConnSelf(&c.perfspyN, c.remoteAddr, c.rwc.LocalAddr()); perfspyRegion.Begin(ctx, w.req); perfspyRegion.Peer(c.remoteAddr, &c.perfspyN); serverHandler{c.server}.ServeHTTP(w, w.req)\n"),
	// Each connection numbers its requests, so that a bill names the
	// request as the load driver does (its port, its number on it); its
	// top bits tell, once asked, whether its client is the process itself.
	edit("server.go", "type conn struct {\n", "type conn struct { perfspyN uint64 // perfspy: the requests begun on it\n"),
	edit("server.go",
		"\t\tif c.hijacked() {\n\t\t\tc.r.releaseConn()\n\t\t\treturn\n\t\t}\n\t\tw.finishRequest()\n",
		"\t\tif c.hijacked() {\n\t\t\tc.r.releaseConn(); perfspyRegion.End()\n\t\t\treturn\n\t\t}\n\t\tw.finishRequest(); perfspyRegion.End()\n"),
	edit("server.go", routes.HTTPMuxEdit[0], routes.HTTPMuxEdit[1]),
	edit("server.go", routes.HTTPReadEdit[0], routes.HTTPReadEdit[1]),
}

// h2Edits put the HTTP/2 server's boundary in, by release: Go 1.26 bundles
// x/net/http2 into net/http (h2_bundle.go: (*http2serverConn).runHandler);
// Go 1.27 keeps it in net/http/internal/http2, whose handlers net/http
// wraps in http2Handler (http2.go), where the *Request is made.
var h2Edits = map[string][]routes.Edit{
	"go1.26": {edit("h2_bundle.go",
		"\t}()\n\thandler(rw, req)\n\tdidPanic = false\n",
		"\t}()\n\tvar perfspyRegion perfspyRequest; perfspyRegion.Begin(req.Context(), req); perfspyRegion.PeerStream(req.RemoteAddr, rw.rws.stream.id); handler(rw, req); perfspyRegion.End()\n\tdidPanic = false\n")},
	"go1.27": {
		edit("http2.go",
			"func (h http2Handler) ServeHTTP(w *http2.ResponseWriter, req *http2.ServerRequest) {\n\th.h.ServeHTTP(http2ResponseWriter{w}, &Request{\n",
			"func (h http2Handler) ServeHTTP(w *http2.ResponseWriter, req *http2.ServerRequest) {\n\tperfspyReq := &Request{\n"),
		edit("http2.go",
			"\t\tMultipartForm: req.MultipartForm,\n\t})\n}\n",
			"\t\tMultipartForm: req.MultipartForm,\n\t}; var perfspyRegion perfspyRequest; perfspyRegion.Begin(perfspyReq.Context(), perfspyReq); perfspyRegion.PeerStream(req.RemoteAddr, w.PerfspyStream()); h.h.ServeHTTP(http2ResponseWriter{w}, perfspyReq); perfspyRegion.End()\n}\n"),
	},
}

// h2Files are the files added to net/http/internal/http2, by release:
// Go 1.27's HTTP/2 server keeps the stream in a package of its own, so
// net/http asks it for the stream's id (PeerStream).
var h2Files = map[string]map[string]string{
	"go1.27": {"zz_perfspy_stream.go": `// Code added to package http2 by perfspy's request boundaries. DO NOT EDIT.

package http2

// PerfspyStream is the id of the stream w answers.
func (w *responseWriter) PerfspyStream() uint32 { return w.rws.stream.id }
`},
}

// withoutBoundaries is what a run does without this overlay.
const withoutBoundaries = "off-CPU time, the tail and routes are measured without request boundaries"

// Overlay writes net/http's files with the request boundaries into dir and
// returns the go build -overlay Replace entries, keyed by GOROOT paths.
func Overlay(goroot, dir string) (map[string]string, error) {
	rel, err := gorelease.Of("request boundaries", goroot, withoutBoundaries, slices.Sorted(maps.Keys(h2Edits)))
	if err != nil {
		return nil, err
	}
	src := filepath.Join(goroot, "src", "net", "http")
	files, err := routes.ApplyEdits(src, "request boundaries", append(slices.Clip(requestEdits), h2Edits[rel]...))
	if err != nil {
		return nil, err
	}
	files[filepath.Join(src, routes.HTTPFileName)] = routes.HTTPFile(RegionType)
	for name, text := range routes.SelfFiles {
		files[filepath.Join(src, name)] = text
	}
	for name, text := range h2Files[rel] {
		files[filepath.Join(src, "internal", "http2", name)] = text
	}
	out, err := routes.RuntimeOverlay(goroot, dir)
	if err != nil {
		return nil, err
	}
	calls, err := routes.PprofOverlay(goroot, dir)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, calls)
	for path, text := range files {
		if _, err := os.Stat(path); err == nil && strings.HasPrefix(filepath.Base(path), "zz_perfspy_") {
			return nil, capability.Shape("request boundaries", "%s already exists in GOROOT", path)
		}
		dst := filepath.Join(dir, "http_"+filepath.Base(path))
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			return nil, err
		}
		out[path] = dst
	}
	return out, nil
}

// edit is one of requestEdits.
func edit(file, old, new string) routes.Edit { return routes.Edit{File: file, Old: old, New: new} }
