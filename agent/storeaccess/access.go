// Package storeaccess is how perfspy reaches a profile store: headers,
// credentials from the environment, the certificate authority of an https
// store, the limits of each call, and the redaction of addresses in
// messages. It uses the standard library only: the agent's live mode
// (agent/live) pushes with it from inside the user's program, and probe's
// profstore calls the store's API over it.
package storeaccess

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
)

// Defaults of an Access: each call to the store, its whole answer
// included, ends within DefaultTimeout, and an answer over
// DefaultMaxResponse bytes is refused before it is decoded.
const (
	DefaultTimeout     = time.Minute
	DefaultMaxResponse = 256 << 20
)

// The environment an Access reads its credentials from: never a flag,
// whose value ps shows and meta records.
const (
	EnvHeaders   = "PERFSPY_PUSH_HEADERS"    // K=V lines (or K=V,K=V): X-Scope-OrgID=tenant
	EnvToken     = "PERFSPY_PUSH_TOKEN"      // a bearer token
	EnvTokenFile = "PERFSPY_PUSH_TOKEN_FILE" // a file holding one
	EnvBasic     = "PERFSPY_PUSH_BASIC_AUTH" // USER:PASSWORD
	EnvBasicFile = "PERFSPY_PUSH_BASIC_AUTH_FILE"
	EnvCACert    = "PERFSPY_PUSH_CACERT"
)

// Access is how perfspy reaches a store: headers (a tenant's
// X-Scope-OrgID), credentials, the certificate authority of an https
// store, and the limits of each call.
type Access struct {
	Headers     map[string]string
	Token       string // bearer
	User        string // basic auth
	Password    string
	CACert      string // PEM file
	Timeout     time.Duration
	MaxResponse int64
}

// OrDefault is a, or the default access (no credentials) when nil.
func (a *Access) OrDefault() *Access {
	if a == nil {
		return &Access{Timeout: DefaultTimeout, MaxResponse: DefaultMaxResponse}
	}
	return a
}

// AddFlags adds the store's flags to fs: -push-header, -push-cacert,
// -push-timeout and -store-max-response. Credentials have none.
func (a *Access) AddFlags(fs *flag.FlagSet) {
	fs.Var(headerValues{a}, "push-header", "`K=V` sent with every call to the store, e.g. X-Scope-OrgID=tenant (repeatable; also "+EnvHeaders+"); credentials come from "+EnvToken+"[_FILE] or "+EnvBasic+"[_FILE]")
	fs.StringVar(&a.CACert, "push-cacert", "", "verify an https store's certificate against this PEM `file` (also "+EnvCACert+")")
	fs.DurationVar(&a.Timeout, "push-timeout", DefaultTimeout, "each call to the store ends within this `duration`, its answer included")
	fs.Int64Var(&a.MaxResponse, "store-max-response", DefaultMaxResponse, "refuse a store's answer over this many `bytes`")
}

// headerValues is -push-header.
type headerValues struct{ a *Access }

func (h headerValues) String() string { return "" }

func (h headerValues) Set(v string) error { return h.a.addHeader(v) }

func (a *Access) addHeader(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n\x00") {
		return fmt.Errorf("want K=V (a header name and its value on one line), got %q", RedactHeader(kv))
	}
	if a.Headers == nil {
		a.Headers = map[string]string{}
	}
	a.Headers[http.CanonicalHeaderKey(k)] = strings.TrimSpace(v)
	return nil
}

// FromEnv completes a from the environment (getenv: os.Getenv in
// commands): headers, a token or basic auth (the variable, or the file
// the _FILE variable names), the certificate authority.
func (a *Access) FromEnv(getenv func(string) string) error {
	for _, line := range strings.FieldsFunc(getenv(EnvHeaders), func(r rune) bool { return r == '\n' || r == ',' }) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := a.addHeader(line); err != nil {
			return fmt.Errorf("%s: %w", EnvHeaders, err)
		}
	}
	token, err := secret(getenv, EnvToken, EnvTokenFile)
	if err != nil {
		return err
	}
	basic, err := secret(getenv, EnvBasic, EnvBasicFile)
	if err != nil {
		return err
	}
	if token != "" && basic != "" {
		return fmt.Errorf("both a token (%s) and basic auth (%s) are set: keep one", EnvToken, EnvBasic)
	}
	a.Token = token
	if basic != "" {
		var ok bool
		if a.User, a.Password, ok = strings.Cut(basic, ":"); !ok || a.User == "" {
			return fmt.Errorf("%s: want USER:PASSWORD", EnvBasic)
		}
	}
	if a.CACert == "" {
		a.CACert = getenv(EnvCACert)
	}
	if a.Timeout <= 0 {
		a.Timeout = DefaultTimeout
	}
	if a.MaxResponse <= 0 {
		a.MaxResponse = DefaultMaxResponse
	}
	return nil
}

// secret reads a credential from the variable env, or from the file that
// fileEnv names (trailing newline dropped).
func secret(getenv func(string) string, env, fileEnv string) (string, error) {
	v, f := getenv(env), getenv(fileEnv)
	switch {
	case v != "" && f != "":
		return "", fmt.Errorf("both %s and %s are set: keep one", env, fileEnv)
	case f != "":
		b, err := readSmallFile(f)
		if err != nil {
			return "", fmt.Errorf("%s: %w", fileEnv, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return v, nil
}

// Check validates a store's base URL (http:// or https://HOST:PORT) for
// this access, before any run: no credentials in the URL (they would be
// in ps, meta and every error), and none sent in clear to another
// machine.
func (a *Access) Check(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("store %s: want http://HOST:PORT or https://HOST:PORT", Redact(base))
	}
	if u.User != nil {
		return fmt.Errorf("store %s: credentials in the address are refused (ps and the results would show them): set %s or %s, or their _FILE forms", Redact(base), EnvBasic, EnvToken)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("store %s: want no query or fragment in the address", Redact(base))
	}
	if (a.Token != "" || a.User != "") && u.Scheme == "http" && !loopback(u.Hostname()) {
		return fmt.Errorf("store %s: credentials would go in clear over http to another machine; use https://", Redact(base))
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Client is the HTTP client of a's calls: its deadline covers the whole
// answer, its transport trusts CACert, and every request carries the
// headers and credentials.
func (a *Access) Client() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if a.CACert != "" {
		pem, err := readSmallFile(a.CACert)
		if err != nil {
			return nil, fmt.Errorf("-push-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-push-cacert %s: no PEM certificate in it", a.CACert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{Timeout: timeout, Transport: authTransport{a, tr}, CheckRedirect: sameStore}, nil
}

// ErrRedirect is a store's redirect to another host or scheme: refused,
// as following it would send the credentials and the tenant's headers
// (added to every request) where the user did not point them.
var ErrRedirect = errors.New("the store redirected elsewhere")

// ErrTooLarge is an answer whose declared length is over MaxResponse:
// refused on its header, unread.
var ErrTooLarge = errors.New("the store's answer is over the limit")

// sameStore lets a redirect stay on the first request's scheme and host
// only.
func sameStore(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("%w: %s to %s refused (credentials go to the configured store only)", ErrRedirect, Redact(first.Scheme+"://"+first.Host), Redact(req.URL.Scheme+"://"+req.URL.Host))
	}
	if len(via) >= 10 {
		return fmt.Errorf("%w: 10 redirects", ErrRedirect)
	}
	return nil
}

// authTransport adds an Access's headers and credentials.
type authTransport struct {
	a    *Access
	next http.RoundTripper
}

func (t authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for _, k := range sortedKeys(t.a.Headers) {
		r.Header.Set(k, t.a.Headers[k])
	}
	switch {
	case t.a.Token != "":
		r.Header.Set("Authorization", "Bearer "+t.a.Token)
	case t.a.User != "":
		r.SetBasicAuth(t.a.User, t.a.Password)
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	limit := t.a.MaxResponse
	if limit <= 0 {
		limit = DefaultMaxResponse
	}
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: it declares %d bytes, over %d (-store-max-response); not read", ErrTooLarge, resp.ContentLength, limit)
	}
	if resp.ContentLength < 0 {
		// An answer that declares no length (chunked) is read here, cut
		// at the limit: a reader that drains an answer it refuses
		// (Connect does, to reuse the connection) would read an endless
		// one until the deadline, into a buffer it doubles.
		body, n, err := readCapped(resp.Body, limit)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body, resp.ContentLength = body, n
	}
	return resp, nil
}

// capChunk is the size of the pieces an answer of no declared length is
// read into: never copied to grow, so that the memory of an answer cut at
// the limit is about the limit.
const capChunk = 1 << 20

// readCapped reads r whole into pieces, at most limit bytes; a byte more
// is ErrTooLarge, and the rest is not read.
func readCapped(r io.Reader, limit int64) (io.ReadCloser, int64, error) {
	var pieces [][]byte
	var n int64
	for {
		size := min64(capChunk, limit-n+1) // one byte past the limit tells an answer too long
		if n < capChunk {
			size = min64(size, 32<<10) // small answers, small pieces
		}
		p := make([]byte, size)
		m, err := io.ReadFull(r, p)
		n += int64(m)
		if m > 0 {
			pieces = append(pieces, p[:m])
		}
		if n > limit {
			return nil, 0, fmt.Errorf("%w: more than %d bytes (-store-max-response); cut while reading", ErrTooLarge, limit)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return &piecesReader{pieces: pieces}, n, nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// piecesReader reads the pieces in order, dropping each once read.
type piecesReader struct{ pieces [][]byte }

func (p *piecesReader) Read(b []byte) (int, error) {
	for len(p.pieces) > 0 && len(p.pieces[0]) == 0 {
		p.pieces[0] = nil
		p.pieces = p.pieces[1:]
	}
	if len(p.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.pieces[0])
	p.pieces[0] = p.pieces[0][n:]
	return n, nil
}

func (p *piecesReader) Close() error { p.pieces = nil; return nil }

// Redact returns a URL or address with its password (and query values,
// which may be tokens) replaced, for messages and files.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Unparsable: cut whatever may hold userinfo.
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			if j := strings.Index(raw, "://"); j >= 0 && j < i {
				return raw[:j+3] + "REDACTED@" + raw[i+1:]
			}
			return "REDACTED@" + raw[i+1:]
		}
		return raw
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for _, k := range sortedQueryKeys(q) {
			if SensitiveName(k) {
				q[k] = []string{"REDACTED"}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func sortedQueryKeys(q url.Values) []string {
	k := make([]string, 0, len(q))
	for s := range q {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// RedactHeader keeps a "K: V" or "K=V" header's name and hides its value.
func RedactHeader(h string) string {
	i := strings.IndexAny(h, ":=")
	if i < 0 {
		return "REDACTED"
	}
	return h[:i+1] + "REDACTED"
}

// SensitiveName tells a parameter or flag name that usually holds a
// secret.
func SensitiveName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"pass", "secret", "token", "key", "auth", "cred", "sig", "session", "cookie"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// maxSmallFile bounds a credential or certificate file.
const maxSmallFile = 1 << 20

// readSmallFile reads a credential or a certificate: a regular file of at
// most maxSmallFile bytes. A FIFO is refused before it is opened (its
// open() would wait for a writer, deaf to signals), as a device is
// (/dev/zero never ends).
func readSmallFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (mode %s): refused before opening it", path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSmallFile+1))
	if err == nil && len(b) > maxSmallFile {
		err = fmt.Errorf("%s is over %d bytes: not a certificate or a credential", path, maxSmallFile)
	}
	return b, err
}
