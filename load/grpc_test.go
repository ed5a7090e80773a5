package load

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
)

// startGRPCEcho builds and starts targets/grpcecho with args and returns
// its address.
func startGRPCEcho(t *testing.T, args ...string) string {
	t.Helper()
	return startTarget(t, "../targets/grpcecho", func(line string) (string, bool) {
		return strings.CutPrefix(line, "grpcecho: listening on ")
	}, args...)
}

// TestGRPCDriver: the method resolved through reflection, calls counted
// as OK; bad input is refused before any load, saying what was wrong.
func TestGRPCDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts targets/grpcecho; skipped with -short")
	}
	addr := startGRPCEcho(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !AnswersReflection(ctx, addr) {
		t.Fatal("grpcecho does not answer reflection")
	}
	d, err := NewGRPC(ctx, GRPCOptions{Addr: addr, Method: "perfspy.echo.Echo/Echo", Data: []byte(`{"payload":"aGVsbG8=","repeat":3}`), Conns: 2,
		Headers: map[string]string{"x-test": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.RunN(ctx, 200)
	if err != nil || r.OK != 200 || r.Errors != 0 || r.Non2xx != 0 {
		t.Fatalf("200 calls: %+v %v", r, err)
	}
	for _, c := range []struct {
		opt  GRPCOptions
		want string
	}{
		{GRPCOptions{Addr: addr, Method: "perfspy.echo.Echo/Nope"}, "has no method Nope (it has Echo)"},
		{GRPCOptions{Addr: addr, Method: "perfspy.echo.Nope/Echo"}, "has no service perfspy.echo.Nope"},
		{GRPCOptions{Addr: addr, Method: "Echo"}, "want package.Service/Method"},
		{GRPCOptions{Addr: addr, Method: "perfspy.echo.Echo/Echo", Data: []byte(`{"payload":1}`)}, "-data does not match perfspy.echo.EchoRequest"},
		{GRPCOptions{Addr: addr, Method: "perfspy.echo.Echo/Echo", Data: []byte(`{"nope":1}`)}, "-data does not match"},
	} {
		if _, err := NewGRPC(ctx, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.opt, err, c.want)
		}
	}
	// A server with only the old reflection service (v1alpha).
	alpha := startGRPCEcho(t, "-reflection=v1alpha")
	if !AnswersReflection(ctx, alpha) {
		t.Error("a server with v1alpha reflection does not answer it")
	}
	ad, err := NewGRPC(ctx, GRPCOptions{Addr: alpha, Method: "perfspy.echo.Echo/Echo", Data: []byte(`{"repeat":2}`), Conns: 1})
	if err != nil {
		t.Fatalf("v1alpha reflection: %v", err)
	}
	defer ad.Close()
	if r, err := ad.RunN(ctx, 50); err != nil || r.OK != 50 {
		t.Errorf("through v1alpha reflection: %+v %v", r, err)
	}
	if _, err := NewGRPC(ctx, GRPCOptions{Addr: alpha, Method: "perfspy.echo.Nope/Echo"}); err == nil || !strings.Contains(err.Error(), "has no service perfspy.echo.Nope") {
		t.Errorf("v1alpha, unknown service: err %v", err)
	}
	noRefl := startGRPCEcho(t, "-reflection=false")
	if AnswersReflection(ctx, noRefl) {
		t.Error("a server without reflection answers it")
	}
	if _, err := NewGRPC(ctx, GRPCOptions{Addr: noRefl, Method: "perfspy.echo.Echo/Echo"}); err == nil || !strings.Contains(err.Error(), "-proto-file") {
		t.Errorf("no reflection: err %v, want a hint at -proto-file", err)
	}
	// The same server described by its .proto file.
	dir := t.TempDir()
	proto := filepath.Join(dir, "perfspy", "echo.proto")
	os.MkdirAll(filepath.Dir(proto), 0o755)
	os.WriteFile(proto, []byte(echoProto), 0o644)
	files, err := ProtoFiles(ctx, []string{proto}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := NewGRPC(ctx, GRPCOptions{Addr: noRefl, Method: "perfspy.echo.Echo/Echo", Data: []byte(`{"repeat":2}`), Conns: 1, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	if r, err := pd.RunN(ctx, 50); err != nil || r.OK != 50 {
		t.Errorf("with -proto-file: %+v %v", r, err)
	}
	os.WriteFile(proto, []byte("syntax = \"proto3\";\nmessage {"), 0o644)
	if _, err := ProtoFiles(ctx, []string{proto}, nil); err == nil || !strings.Contains(err.Error(), "echo.proto") {
		t.Errorf("a broken .proto: err %v, want the file named", err)
	}
}

// echoProto is targets/grpcecho's service as a .proto file.
const echoProto = `syntax = "proto3";
package perfspy.echo;
message EchoRequest { bytes payload = 1; int32 repeat = 2; }
message EchoReply { bytes payload = 1; }
service Echo { rpc Echo(EchoRequest) returns (EchoReply); }
`

// TestGRPCLeanDriver checks the lean driver against targets/grpcecho,
// whose replies are known: every call OK, replies of one and of several
// DATA frames, metadata delivered (x-echo-status makes every call a
// Non2xx with the status the server was asked for), and no allocation per
// call once the connection is open.
func TestGRPCLeanDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts targets/grpcecho; skipped with -short")
	}
	addr := startGRPCEcho(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		data string
	}{
		{"small", `{"payload":"aGVsbG8=","repeat":3}`},
		// 5 x 20000 bytes: a reply in several DATA frames.
		{"large", `{"payload":"aGVsbG8=","repeat":20000}`},
		{"empty", ``},
	} {
		d, err := NewGRPCLean(ctx, GRPCOptions{Addr: addr, Method: "perfspy.echo.Echo/Echo", Data: []byte(c.data), Conns: 2,
			Headers: map[string]string{"X-Test": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.RunN(ctx, 300)
		d.Close()
		if err != nil || r.OK != 300 || r.Errors != 0 || r.Non2xx != 0 || r.Dials != 2 {
			t.Errorf("%s: 300 calls: OK %d, errors %d, non-OK %d, dials %d, first error %q, %v", c.name, r.OK, r.Errors, r.Non2xx, r.Dials, r.FirstErr, err)
		}
	}
	d, err := NewGRPCLean(ctx, GRPCOptions{Addr: addr, Method: "perfspy.echo.Echo/Echo", Conns: 1, Headers: map[string]string{"x-echo-status": "5"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.RunN(ctx, 50)
	d.Close()
	if err != nil || r.OK != 0 || r.Non2xx != 50 || r.Errors != 0 || r.FirstErr != "grpc status 5: asked for status 5" {
		t.Errorf("x-echo-status 5: OK %d, non-OK %d, errors %d, first error %q, %v", r.OK, r.Non2xx, r.Errors, r.FirstErr, err)
	}

	d, err = NewGRPCLean(ctx, GRPCOptions{Addr: addr, Method: "perfspy.echo.Echo/Echo", Data: []byte(`{"payload":"aGVsbG8=","repeat":3}`), Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if r, err := d.RunN(ctx, 10); err != nil || r.OK != 10 {
		t.Fatalf("warm-up: %+v %v", r, err)
	}
	c := d.conns[0]
	var callErr error
	allocs := testing.AllocsPerRun(500, func() {
		if err := c.roundTrip(); err != nil && callErr == nil {
			callErr = err
		}
	})
	if callErr != nil || allocs != 0 {
		t.Errorf("%.2f allocations per call (want 0), %v", allocs, callErr)
	}

	big := strings.Repeat("A", MaxLeanGRPCRequest*4/3+8) // base64 of more than the limit
	if _, err := NewGRPCLean(ctx, GRPCOptions{Addr: addr, Method: "perfspy.echo.Echo/Echo", Data: []byte(`{"payload":"` + big + `"}`)}); err == nil || !strings.Contains(err.Error(), "the lean gRPC driver sends at most") {
		t.Errorf("a request over the limit: err %v", err)
	}
}

// FuzzGRPCLeanReply feeds the lean driver's frame reader arbitrary bytes
// as a server's reply: it returns an error or a verdict, never panics, and
// never reads past what it was given.
func FuzzGRPCLeanReply(f *testing.F) {
	ok := h2Frame(nil, h2Settings, 0, 0, nil)
	ok = h2Frame(ok, h2Headers, h2EndHeaders, 1, []byte{0x88}) // :status 200
	ok = h2Frame(ok, h2Data, 0, 1, []byte{0, 0, 0, 0, 1, 7})
	f.Add(ok)
	f.Add(h2Frame(nil, h2Headers, h2Padded|h2Priority, 1, []byte{200}))
	f.Add(h2Frame(nil, h2Data, h2Padded, 1, []byte{9, 1}))
	// The lean h2c driver reads with the same reader (http: an HTTP reply).
	f.Fuzz(func(t *testing.T, reply []byte) {
		c := &h2Conn{r: bufio.NewReader(bytes.NewReader(reply)), stream: 1, next: 3, peerWin: 65535, sendWin: 65535, http: len(reply)%2 == 1}
		c.dec = hpack.NewDecoder(4096, c.field)
		c.dec.SetMaxStringLength(h2MaxHeaderBlock)
		c.c = discardConn{}
		for i := 0; c.stream != 0 && i < 1000; i++ {
			if err := c.readFrame(); err != nil {
				return
			}
		}
		if c.stream == 0 {
			_ = c.verdict()
		}
	})
}

// discardConn is a connection whose writes go nowhere: the fuzzed reader's
// acknowledgements.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error) { return len(b), nil }

// TestHeaderBlocks decodes the lean driver's header blocks with an HPACK
// decoder, as a server would, in the order a connection sends them: the
// first call's (indexing its fields), then the steady ones (naming them by
// index), then the literal one (after a table size update to 0). Each
// decodes to the same fields; fields too large for the table are sent as
// literals in every block.
func TestHeaderBlocks(t *testing.T) {
	for _, md := range []map[string]string{{"X-Test": "1", "b": "2"}, {"big": strings.Repeat("v", hpackTable)}} {
		fields := callFields("/pkg.Svc/Method", "127.0.0.1:1", md)
		var got []string
		dec := hpack.NewDecoder(hpackTable, func(f hpack.HeaderField) { got = append(got, f.Name+": "+f.Value) })
		var want []string
		for _, f := range append([]hpackField{{0, ":method", "POST"}, {0, ":scheme", "http"}}, fields...) {
			want = append(want, f.name+": "+f.value)
		}
		for i, kind := range []int{blockFirst, blockSteady, blockSteady, blockLiteral, blockLiteral} {
			got = got[:0]
			b := headerBlock([]byte{0x83, 0x86}, fields, kind)
			if _, err := dec.Write(b); err != nil {
				t.Fatalf("block %d: %v", i, err)
			}
			if err := dec.Close(); err != nil {
				t.Fatalf("block %d: %v", i, err)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("block %d (kind %d) decodes to\n%s\nwant\n%s", i, kind, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if kind == blockSteady && len(md) == 2 && len(b) != 2+len(fields) {
				t.Errorf("a steady block of %d bytes, want one byte a field", len(b))
			}
		}
	}
}
