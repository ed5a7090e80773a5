package load

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/perfspy/perfspy/internal/limits"
	"github.com/perfspy/perfspy/wirefmt/bulk"
)

// MaxConns is the most connections a spec takes.
const MaxConns = 4096

// MaxRate is the highest open-loop rate, requests per second.
const MaxRate = 10_000_000

// Protos are the drivers' protocols; auto is resolved by what the
// started target answers (Spec.Resolve).
var Protos = []string{"auto", "http", "https", "h2c", "h2", "grpc", "framed", "quic", "udp"}

// Endpoint is where the target listens, as the driver needs it.
type Endpoint struct {
	Addr string
	UDP  bool
}

// ClosedLoopOnly says whether the driver of proto sends in a closed loop
// only, and payloads of its own making.
func ClosedLoopOnly(proto string) bool {
	return proto == "framed" || proto == "quic" || proto == "udp"
}

// Check says what in s cannot be sent, before any build: every field's
// range, the combinations no driver takes (an open loop or a body of
// yours with a closed-loop protocol, a request file with HTTP/2), and the
// files it names. window is the timing window's load, which an open
// loop's gap must fit. Errors name the flag.
func (s Spec) Check(window time.Duration) error {
	switch {
	case s.Conns < 0 || s.Conns > MaxConns:
		return fmt.Errorf("-conns %d: want 1 to %d (each connection is dialed before a window opens; more stretch the window without loading the server harder)", s.Conns, MaxConns)
	case !strings.HasPrefix(s.Path, "/"):
		return fmt.Errorf("-path %q: must start with /", s.Path)
	case s.Size < 0 || s.Size > 1<<30:
		return fmt.Errorf("-size %d: want 1 byte to 1 GiB", s.Size)
	case s.Streams < 0:
		return fmt.Errorf("-streams %d: must be positive", s.Streams)
	case s.Pkt != 0 && (s.Pkt <= bulk.HeaderSize || s.Pkt > 65507):
		return fmt.Errorf("-pkt %d: want %d to 65507", s.Pkt, bulk.HeaderSize+1)
	}
	if err := CheckPath(s.Path); err != nil {
		return fmt.Errorf("-path: %w", err)
	}
	if a := s.Arrivals; a.Rate < 0 || math.IsNaN(a.Rate) || math.IsInf(a.Rate, 0) || a.Rate > MaxRate {
		return fmt.Errorf("-rate %g: want requests per second, above 0 and at most 1e7 (0: closed loop)", a.Rate)
	}
	// A gap longer than the window sends nothing in it, and one past
	// 2^63 ns cannot be scheduled.
	if a := s.Arrivals; a.Open() && float64(time.Second)/a.Rate > float64(max(window, time.Second)) {
		return fmt.Errorf("-rate %g: one request every %.3gs, longer than the window (-duration %v): it would send none", a.Rate, 1/a.Rate, window)
	}
	if err := s.checkFiles(); err != nil {
		return err
	}
	return s.fits(s.Proto)
}

// fits says whether proto's driver takes s: the one check of the
// combinations, made on -proto before the build and on the protocol
// -proto auto found once the target answers.
func (s Spec) fits(proto string) error {
	switch {
	case s.Arrivals.Open() && ClosedLoopOnly(proto):
		return fmt.Errorf("-rate: the %s driver sends in a closed loop only; open-loop load is for http, https, h2c, h2 and grpc", proto)
	case len(s.Data) > 0 && ClosedLoopOnly(proto):
		return fmt.Errorf("-data: the %s driver sends no body of yours; -data is the body of http, https, h2c and h2 requests and grpc's message", proto)
	case len(s.Mix) > 0 && (proto == "h2c" || proto == "h2" || s.HTTPDriver != "lean"):
		return errors.New("-requests: request files are sent by the lean HTTP/1.1 driver (http or https, -http-driver lean)")
	}
	return nil
}

// checkFiles checks the files s names: -cacert's certificate, the
// .proto files and their import paths.
func (s Spec) checkFiles() error {
	if s.CACert != "" {
		if _, err := s.tlsConfig(); err != nil {
			return err
		}
	}
	for _, f := range s.ProtoFiles {
		if st, err := os.Stat(f); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("-proto-file %s: not a regular file", f)
		}
	}
	for _, d := range s.ImportPaths {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return fmt.Errorf("-import-path %s: not a folder", d)
		}
	}
	return nil
}

// ProtoFor is the driver's protocol: Proto, or what auto can tell
// without asking the target (Resolve asks it): a UDP socket is QUIC, a
// method naming an RPC is gRPC, else HTTP.
func (s Spec) ProtoFor(ep Endpoint) string {
	if s.Proto != "" && s.Proto != "auto" {
		return s.Proto
	}
	switch {
	case ep.UDP:
		return "quic"
	case strings.Contains(s.Method, "/"):
		return "grpc"
	}
	return "http"
}

// Resolve resolves auto for a started target by what it answers, never
// by its name: on UDP, the bulk protocol (udp) or else QUIC; on TCP,
// HTTP/1.1, else gRPC reflection, else the framed protocol, else HTTP
// (whose warm-up then says what failed).
func (s Spec) Resolve(ctx context.Context, ep Endpoint) string {
	p := s.ProtoFor(ep)
	if s.Proto != "" && s.Proto != "auto" {
		return p
	}
	switch {
	case ep.UDP:
		if AnswersBulkUDP(ctx, ep.Addr) {
			return "udp"
		}
	// An HTTP/1 server is never sent a gRPC preface (it would log a
	// "PRI *" request it cannot serve) or a frame: only a target that
	// does not answer HTTP/1.1 is asked for the others.
	case p == "http" && !AnswersHTTP1(ctx, ep.Addr, s.Path):
		if AnswersReflection(ctx, ep.Addr) {
			return "grpc"
		}
		if AnswersFramed(ctx, ep.Addr) {
			return "framed"
		}
	}
	return p
}

// DriverName names the driver New makes for ep.
func (s Spec) DriverName(ep Endpoint) string {
	switch p := s.ProtoFor(ep); {
	case p == "grpc" && s.GRPCDriver == "grpcgo":
		return "grpcgo"
	case p == "h2c" && !s.h2cLean():
		return "h2c-nethttp"
	case p != "http":
		return p
	}
	return s.HTTPDriver
}

// New makes the driver of s for the target at ep, Proto resolved
// (Resolve) or given.
func (s Spec) New(ep Endpoint) (Driver, error) {
	proto := s.ProtoFor(ep)
	if err := s.fits(proto); err != nil {
		return nil, err
	}
	switch proto {
	case "framed":
		return NewFramed(FramedOptions{Addr: ep.Addr, Conns: s.Conns, BodySize: s.BodySize})
	case "quic":
		return NewQUIC(QUICOptions{Addr: ep.Addr, Conns: s.Conns, Streams: s.Streams, Size: s.Size})
	case "udp":
		return NewUDP(UDPOptions{Addr: ep.Addr, Conns: s.Conns, Size: s.Size, Pkt: s.Pkt})
	case "grpc":
		return s.newGRPC(ep)
	case "http", "https", "h2c", "h2":
		return s.newHTTP(ep, proto)
	}
	return nil, fmt.Errorf("-proto %q: want %s", s.Proto, strings.Join(Protos, ", "))
}

// newGRPC makes the gRPC driver: the lean one, or grpc-go's client.
func (s Spec) newGRPC(ep Endpoint) (Driver, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	method := s.Method
	if !strings.Contains(method, "/") && len(s.ProtoFiles) == 0 {
		// No RPC named: a server of one method is sent that one.
		if m, ok := OnlyMethod(ctx, ep.Addr); ok {
			method = m
		}
	}
	opt := GRPCOptions{Addr: ep.Addr, Method: method, Data: s.Data, Headers: s.Headers, Conns: s.Conns, Arrivals: s.Arrivals}
	if len(s.ProtoFiles) > 0 {
		var err error
		if opt.Files, err = ProtoFiles(ctx, s.ProtoFiles, s.ImportPaths); err != nil {
			return nil, err
		}
	}
	if s.GRPCDriver == "grpcgo" {
		return NewGRPC(ctx, opt)
	}
	d, err := NewGRPCLean(ctx, opt)
	if err != nil {
		return nil, fmt.Errorf("%w (-grpc-driver grpcgo sends any request)", err)
	}
	return d, nil
}

// newHTTP makes the HTTP drivers: HTTP/1.1 (lean or net/http's) over
// TCP or TLS, HTTP/2 with prior knowledge (h2c) or over TLS (h2).
func (s Spec) newHTTP(ep Endpoint, proto string) (Driver, error) {
	scheme := "http"
	if proto == "https" || proto == "h2" {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: ep.Addr, Path: s.Path}
	if q := strings.IndexByte(s.Path, '?'); q >= 0 {
		u.Path, u.RawQuery = s.Path[:q], s.Path[q+1:]
	}
	opt := HTTPOptions{URL: u.String(), Method: s.Method, Body: s.HTTPBody(), Conns: s.Conns, Headers: s.Headers, Mix: s.Mix, Arrivals: s.Arrivals}
	if scheme == "https" {
		var err error
		if opt.TLS, err = s.tlsConfig(); err != nil {
			return nil, err
		}
	}
	switch {
	case proto == "h2c" && s.h2cLean():
		return NewH2Lean(opt)
	case proto == "h2c" || proto == "h2":
		return NewH2(opt, s.Conns, s.Streams)
	case s.HTTPDriver == "lean":
		return NewLean(opt)
	}
	return NewHTTP(opt)
}

// h2cLean says whether h2c load goes through the lean driver: the lean
// HTTP driver, one stream per connection and a body of one DATA frame;
// otherwise net/http's client sends it.
func (s Spec) h2cLean() bool {
	return s.HTTPDriver == "lean" && s.Streams <= 1 && len(s.HTTPBody()) <= MaxLeanH2Body
}

// HTTPBody is the HTTP requests' body: Body (-body's file), else Data
// (-data's text, which is gRPC's message when the server speaks gRPC).
func (s Spec) HTTPBody() []byte {
	if s.Body != nil {
		return s.Body
	}
	return s.Data
}

// tlsConfig is the drivers' TLS: the server's certificate verified
// against CACert (else the system's roots), or not at all (Insecure).
func (s Spec) tlsConfig() (*tls.Config, error) {
	c := &tls.Config{InsecureSkipVerify: s.Insecure}
	if s.CACert != "" {
		b, err := limits.ReadFile(s.CACert, limits.Body, "-max-body")
		if err != nil {
			return nil, fmt.Errorf("-cacert: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("-cacert %s: no PEM certificate in it", s.CACert)
		}
	}
	return c, nil
}

// TLSNote says how a TLS driver checked the server's certificate; "" for
// the drivers without TLS.
func (s Spec) TLSNote() string {
	if s.Proto != "https" && s.Proto != "h2" {
		return ""
	}
	switch {
	case s.Insecure:
		return "certificate NOT verified (-insecure)"
	case s.CACert != "":
		return "certificate verified against " + s.CACert + " (-cacert)"
	}
	return "certificate verified against the system's roots"
}
