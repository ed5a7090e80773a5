package routes

import (
	"sync/atomic"
	"testing"
)

func fold(method, path string, size int) string {
	buf := make([]byte, size)
	n := perfspyFold(buf, method, path)
	if n < 0 {
		return "(too long)"
	}
	return string(buf[:n])
}

func TestFold(t *testing.T) {
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/users/42", "GET /users/{n}"},
		{"GET", "/users/42/orders/7", "GET /users/{n}/orders/{n}"},
		{"POST", "/orders/0b8f6a3c-1d2e-4f50-9a6b-7c8d9e0f1a2b", "POST /orders/{uuid}"},
		{"GET", "/", "GET /"},
		{"GET", "", "GET /"},
		{"GET", "/a//b/", "GET /a//b/"},
		{"GET", "/v2/x42/123abc", "GET /v2/x42/123abc"},
		{"GET", "/0b8f6a3c-1d2e-4f50-9a6b-7c8d9e0f1a2", "GET /0b8f6a3c-1d2e-4f50-9a6b-7c8d9e0f1a2"},
		{"GET", "*", "GET *"},
	} {
		if got := fold(c.method, c.path, 256); got != c.want {
			t.Errorf("%s %q: %q, want %q", c.method, c.path, got, c.want)
		}
	}
	if got := fold("GET", "/aaaaaaaaaa", 8); got != "(too long)" {
		t.Errorf("too long: %q", got)
	}
	// Folding never makes a route longer than the path: {n} replaces at
	// least one digit, {uuid} 36 bytes.
	if got := fold("GET", "/1", 8); got != "GET /{n}" {
		t.Errorf("%q", got)
	}
}

func FuzzFold(f *testing.F) {
	f.Add("GET", "/users/42")
	f.Add("POST", "/0b8f6a3c-1d2e-4f50-9a6b-7c8d9e0f1a2b/x")
	f.Fuzz(func(t *testing.T, method, path string) {
		buf := make([]byte, 64)
		n := perfspyFold(buf, method, path)
		if n > len(buf) || n < -1 {
			t.Fatalf("perfspyFold returned %d for a %d-byte buffer", n, len(buf))
		}
		if n >= 0 && n < len(method)+1 {
			t.Fatalf("%q %q: %d bytes, shorter than the method", method, path, n)
		}
	})
}

// BenchmarkRouteOfRequest is the mark's work per request in net/http's
// overlay: fold the path into a stack buffer and look the route up in a
// map read without a lock, as perfspyPathRoute does. It must not
// allocate.
func BenchmarkRouteOfRequest(b *testing.B) {
	var table atomic.Pointer[map[string]uintptr]
	m := map[string]uintptr{"GET /users/{n}/orders/{n}": 3, "GET /json": 1, "GET /health": 2}
	table.Store(&m)
	var sink uintptr
	b.ReportAllocs()
	for b.Loop() {
		var buf [256]byte
		n := perfspyFold(buf[:], "GET", "/users/42/orders/7")
		sink += (*table.Load())[string(buf[:n])]
	}
	if sink == 0 {
		b.Fatal("route not found")
	}
}
