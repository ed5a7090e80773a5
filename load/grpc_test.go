package load

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
