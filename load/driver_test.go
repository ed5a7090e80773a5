package load

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSpecCheck: every combination no driver takes is refused by Check,
// before any build, naming its flag; the same check refuses it again on
// the protocol -proto auto found (New).
func TestSpecCheck(t *testing.T) {
	ok := Spec{Proto: "auto", HTTPDriver: "lean", Path: "/", Method: "GET"}
	if err := ok.Check(time.Second); err != nil {
		t.Fatalf("a plain spec: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"rate with framed", func(s *Spec) { s.Proto, s.Arrivals.Rate = "framed", 100 }, "-rate: the framed driver sends in a closed loop only"},
		{"rate with udp", func(s *Spec) { s.Proto, s.Arrivals.Rate = "udp", 100 }, "-rate: the udp driver"},
		{"rate too slow for the window", func(s *Spec) { s.Arrivals.Rate = 0.1 }, "longer than the window"},
		{"rate too high", func(s *Spec) { s.Arrivals.Rate = 2e7 }, "-rate 2e+07"},
		{"data with quic", func(s *Spec) { s.Proto, s.Data = "quic", []byte("x") }, "-data: the quic driver sends no body"},
		{"request file with h2c", func(s *Spec) { s.Proto, s.Mix = "h2c", []Request{{Method: "GET", Path: "/"}} }, "-requests: request files are sent by the lean HTTP/1.1 driver"},
		{"request file with nethttp", func(s *Spec) { s.HTTPDriver, s.Mix = "nethttp", []Request{{Method: "GET", Path: "/"}} }, "-requests"},
		{"conns", func(s *Spec) { s.Conns = MaxConns + 1 }, "-conns 4097"},
		{"path", func(s *Spec) { s.Path = "x" }, "-path \"x\""},
		{"pkt", func(s *Spec) { s.Pkt = 5 }, "-pkt 5"},
		{"cacert", func(s *Spec) { s.CACert = "/nonexistent/ca.pem" }, "-cacert"},
		{"proto file", func(s *Spec) { s.ProtoFiles = []string{"/nonexistent.proto"} }, "-proto-file /nonexistent.proto"},
	} {
		s := ok
		tc.edit(&s)
		if err := s.Check(time.Second); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// -proto auto with -rate passes Check; a target found to speak the
	// framed protocol is refused when its driver is made.
	s := ok
	s.Arrivals.Rate = 100
	if err := s.Check(time.Second); err != nil {
		t.Fatal(err)
	}
	s.Proto = "framed"
	if _, err := s.New(Endpoint{Addr: "127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "-rate: the framed driver") {
		t.Errorf("New with the framed protocol resolved: %v", err)
	}
}

// TestResolveNeverByName: -proto auto is resolved by what the target
// answers: a TCP listener that answers nothing is HTTP (whose warm-up
// then says what failed); a UDP one is QUIC; a method naming an RPC is
// gRPC before anything is asked.
func TestResolveNeverByName(t *testing.T) {
	addr := hangUp(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := Spec{Proto: "auto", Path: "/", Method: "GET"}
	if p := s.Resolve(ctx, Endpoint{Addr: addr}); p != "http" {
		t.Errorf("a silent TCP listener: %q, want http", p)
	}
	if p := s.ProtoFor(Endpoint{Addr: "127.0.0.1:1", UDP: true}); p != "quic" {
		t.Errorf("UDP: %q, want quic", p)
	}
	s.Method = "pkg.Svc/Call"
	if p := s.ProtoFor(Endpoint{Addr: "127.0.0.1:1"}); p != "grpc" {
		t.Errorf("an RPC method: %q, want grpc", p)
	}
	if s.DriverName(Endpoint{Addr: "127.0.0.1:1"}) != "grpc" {
		t.Errorf("driver name %q", s.DriverName(Endpoint{}))
	}
}
