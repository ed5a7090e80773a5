package profstore

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perfspy/perfspy/agent/storeaccess"
	"github.com/perfspy/perfspy/internal/storetest"
)

func testProfile() *profile.Profile {
	fn := &profile.Function{ID: 1, Name: "main.f"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	return &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}},
		Sample: []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{3}}}, Location: []*profile.Location{loc}, Function: []*profile.Function{fn}}
}

func upload(base string) Upload {
	return Upload{Base: base, Name: "memory", Service: "s", Requests: 1, From: time.Now().Add(-time.Second), Until: time.Now()}
}

// TestPushSilentServer: a store that accepts the connection and never
// answers ends the push at the deadline, and the error names the flag.
func TestPushSilentServer(t *testing.T) {
	a := &storeaccess.Access{Timeout: 300 * time.Millisecond}
	start := time.Now()
	err := Push(context.Background(), a, upload("http://"+storetest.Silent(t)), testProfile())
	if err == nil || !strings.Contains(err.Error(), "-push-timeout") {
		t.Fatalf("Push to a silent server: %v, want an error naming -push-timeout", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Push took %v with a 300ms deadline", d)
	}
}

// TestFetchHugeAnswer: an answer over the limit is refused before it is
// decoded, naming the limit and its flag.
func TestFetchHugeAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/proto")
		// A ProfileTypes answer of 4 MiB: field 1, bytes, repeated.
		chunk := append([]byte{0x0a, 0x80, 0x80, 0x01}, make([]byte, 1<<14)...)
		for range 256 {
			w.Write(chunk)
		}
	}))
	defer srv.Close()
	sel, err := ParseSelection("pyroscope://"+strings.TrimPrefix(srv.URL, "http://")+`/{a="b"}?type=x`, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a := &storeaccess.Access{MaxResponse: 1 << 20, Timeout: 10 * time.Second}
	_, err = Fetch(context.Background(), a, sel)
	if err == nil || !strings.Contains(err.Error(), "-store-max-response") {
		t.Fatalf("Fetch of a 4 MiB answer with a 1 MiB limit: %v, want an error naming -store-max-response", err)
	}
}

// TestFetchEndlessAnswer: an answer that declares no length and never
// ends (chunked) is cut at the limit while it is read: the call ends at
// once, not at its deadline, having read and kept about the limit, and the
// error names the flag.
func TestFetchEndlessAnswer(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/proto")
		chunk := append([]byte{0x0a, 0x80, 0x80, 0x01}, make([]byte, 1<<14)...)
		for r.Context().Err() == nil {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	sel, err := ParseSelection("pyroscope://"+strings.TrimPrefix(srv.URL, "http://")+`/{a="b"}?type=x`, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	a := &storeaccess.Access{MaxResponse: limit, Timeout: 20 * time.Second}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err = Fetch(context.Background(), a, sel)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "-store-max-response") {
		t.Fatalf("Fetch of an endless answer with a 1 MiB limit: %v, want an error naming -store-max-response", err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%v: ended in %v, %d B sent, %d B allocated", err, took, sent.Load(), allocated)
	if took > 10*time.Second {
		t.Errorf("the call took %v: the endless answer was read until the deadline", took)
	}
	if allocated > 2*limit {
		t.Errorf("%d B allocated reading an answer cut at %d B", allocated, limit)
	}
}

// TestAccessSends: headers, a bearer token and basic auth reach the
// store; the token comes from a file.
func TestAccessSends(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/proto")
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600)
	env := map[string]string{EnvHeaders: "X-Scope-OrgID=tenant-1,X-Other=2", EnvTokenFile: tokenFile}
	var a storeaccess.Access
	if err := a.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := Push(context.Background(), &a, upload(srv.URL), testProfile()); err != nil {
		t.Fatal(err)
	}
	if got.Get("X-Scope-Orgid") != "tenant-1" || got.Get("X-Other") != "2" || got.Get("Authorization") != "Bearer t0ken" {
		t.Errorf("the store got %v", got)
	}
	env = map[string]string{EnvBasic: "u:p@ss"}
	a = storeaccess.Access{}
	if err := a.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := Push(context.Background(), &a, upload(srv.URL), testProfile()); err != nil {
		t.Fatal(err)
	}
	if u, p, ok := (&http.Request{Header: got}).BasicAuth(); !ok || u != "u" || p != "p@ss" {
		t.Errorf("basic auth %q %q %v", u, p, ok)
	}
}

// TestAccessRefuses: credentials in an address are refused and never
// printed; credentials do not go in clear to another machine.
func TestAccessRefuses(t *testing.T) {
	for _, addr := range []string{"http://user:hunter2@127.0.0.1:4040", "http://user:hunter2@[::1"} {
		err := (&storeaccess.Access{}).Check(addr)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Check(%s) = %v, want a refusal without the password", addr, err)
		}
	}
	_, err := ParseSelection(`pyroscope://user:hunter2@127.0.0.1:4040/{a="b"}?type=x`, time.Now())
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("ParseSelection with userinfo: %v, want a refusal without the password", err)
	}
	withToken := &storeaccess.Access{Token: "t"}
	if err := withToken.Check("http://store.example:4040"); err == nil {
		t.Error("a token over plain http to another machine was accepted")
	}
	for _, ok := range []string{"http://127.0.0.1:4040", "http://localhost:4040", "https://store.example:4040"} {
		if err := withToken.Check(ok); err != nil {
			t.Errorf("Check(%s) with a token: %v", ok, err)
		}
	}
	env := map[string]string{EnvToken: "a", EnvBasic: "u:p"}
	if err := (&storeaccess.Access{}).FromEnv(func(k string) string { return env[k] }); err == nil {
		t.Error("a token and basic auth together were accepted")
	}
}

// TestRedact keeps names and hides values.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:pw@h:1/x":     "http://REDACTED@h:1/x",
		"/get?token=abc&page=2": "/get?page=2&token=REDACTED",
		"http://h:1":            "http://h:1",
		"http://u:pw@[::1":      "http://REDACTED@[::1",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := RedactHeader("Authorization: Bearer s3cret"); got != "Authorization:REDACTED" {
		t.Errorf("RedactHeader = %q", got)
	}
}

// TestPushHTTPS: an https store whose certificate -push-cacert names.
func TestPushHTTPS(t *testing.T) {
	hit := false
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit = true
		w.Header().Set("Content-Type", "application/proto")
	}))
	defer srv.Close()
	if err := Push(context.Background(), &storeaccess.Access{}, upload(srv.URL), testProfile()); err == nil {
		t.Error("a push to a store with an unknown certificate succeeded")
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	if err := Push(context.Background(), &storeaccess.Access{CACert: ca}, upload(srv.URL), testProfile()); err != nil {
		var ue x509.UnknownAuthorityError
		t.Fatalf("push with -push-cacert: %v (unknown authority: %v)", err, errors.As(err, &ue))
	}
	if !hit {
		t.Error("the store saw no push")
	}
}
