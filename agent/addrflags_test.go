package agent

import "testing"

// TestIsListenAddr: listen addresses are offered; a URL, a DSN with its
// credentials or a bare word are not (their values would be printed).
func TestIsListenAddr(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1:0": true, ":8080": true, "[::1]:9090": true, "localhost:6060": true, "metrics.internal:9100": true,
		"user:secret@db:5432": false, "http://x:80": false, "8080": false, "x:port": false, "host:70000": false, "": false,
	} {
		if got := isListenAddr(s); got != want {
			t.Errorf("isListenAddr(%q) = %v, want %v", s, got, want)
		}
	}
}
