package load

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
)

// H2Lean drives HTTP/2 without TLS, with prior knowledge (h2c), as the
// lean HTTP/1.1 driver drives HTTP/1.1 and GRPCLean gRPC: one connection
// per worker, one stream at a time on it, the request's frames encoded
// once (only their stream id changes), the reply read frame by frame,
// its headers decoded by HPACK, a status other than 2xx a Non2xx. The
// steady state allocates nothing per request. net/http's client costs
// about as much CPU per request as the lightest handler's server side:
// the lean driver leaves the server setting the pace.
type H2Lean struct {
	*h2Pool
}

// MaxLeanH2Body is the largest body the lean h2c driver sends: one DATA
// frame of the size every server accepts, within the windows every
// server starts with.
const MaxLeanH2Body = h2MaxFrame

// leanH2UserAgent is the user-agent the lean h2c driver sends.
const leanH2UserAgent = "perfspy-h2-lean"

// NewH2Lean returns a lean h2c driver for opt: an http:// URL, one
// request (no Mix), a body of at most MaxLeanH2Body bytes.
func NewH2Lean(opt HTTPOptions) (*H2Lean, error) {
	u, err := url.Parse(opt.URL)
	switch {
	case opt.URL == "":
		return nil, errors.New("load: no URL")
	case err != nil:
		return nil, fmt.Errorf("load: %w", err)
	case u.Scheme != "http" || u.Host == "":
		return nil, fmt.Errorf("load: the lean h2c driver speaks http:// (HTTP/2 with prior knowledge) only, not %q", opt.URL)
	case len(opt.Mix) > 0:
		return nil, errors.New("load: the lean h2c driver sends one request, not a mix")
	case len(opt.Body) > MaxLeanH2Body:
		return nil, fmt.Errorf("load: a %d-byte body; the lean h2c driver sends at most %d", len(opt.Body), MaxLeanH2Body)
	}
	if opt.Method == "" {
		opt.Method = "GET"
	}
	if opt.Conns <= 0 {
		opt.Conns = 8
	}
	addr := u.Host
	if u.Port() == "" {
		addr += ":80"
	}
	var data []byte
	if len(opt.Body) > 0 {
		data = opt.Body
	}
	return &H2Lean{newH2Pool(addr, opt.Conns, opt.Arrivals, true, h2Request{h2Lead(opt.Method), h2Fields(u, opt.Body, opt.Headers), data})}, nil
}

// h2Lead encodes :method and :scheme http: GET and POST by their
// static-table entries (2, 3), another method as a literal.
func h2Lead(method string) []byte {
	var b []byte
	switch method {
	case "GET":
		b = []byte{0x82}
	case "POST":
		b = []byte{0x83}
	default:
		b = hpackLiteral(nil, 2, ":method", method)
	}
	return append(b, 0x86) // :scheme http (static 6)
}

// h2Fields are a request's header fields after :method and :scheme: the
// path and authority, content-length with a body, user-agent, and the
// user's headers in name order (lower case, as HTTP/2 wants them).
func h2Fields(u *url.URL, body []byte, headers map[string]string) []hpackField {
	f := []hpackField{{4, ":path", u.RequestURI()}, {1, ":authority", u.Host}}
	if len(body) > 0 {
		f = append(f, hpackField{28, "content-length", strconv.Itoa(len(body))})
	}
	f = append(f, hpackField{58, "user-agent", leanH2UserAgent})
	return appendHeaders(f, headers)
}
