package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadyAsked: readiness from the target's own answer (macOS): one
// address is the endpoint, several need -addr, -addr's port is waited
// for, and nothing is asked before the agent's socket exists.
func TestReadyAsked(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	asked := 0
	answer := []string{"tcp 0.0.0.0:8080", "tcp [::]:8080"}
	ask := func() ([]Listener, error) {
		asked++
		var out []Listener
		for _, s := range answer {
			l, err := ParseListener(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		return out, nil
	}
	if ep, err := readyAsked(ask, "", 0, sock); err != nil || ep.Addr != "" || asked != 0 {
		t.Fatalf("before the socket: %+v %v, asked %d", ep, err, asked)
	}
	os.WriteFile(sock, nil, 0o600)
	if ep, err := readyAsked(ask, "", 0, sock); err != nil || ep.Addr != "127.0.0.1:8080" || ep.UDP {
		t.Errorf("one port on two families: %+v %v", ep, err)
	}
	answer = append(answer, "udp 127.0.0.1:4433")
	if _, err := readyAsked(ask, "", 0, sock); err == nil || !strings.Contains(err.Error(), "choose one with -addr") {
		t.Errorf("two ports: %v", err)
	}
	if ep, err := readyAsked(ask, "127.0.0.1:4433", 4433, sock); err != nil || ep.Addr != "127.0.0.1:4433" || !ep.UDP {
		t.Errorf("-addr's port: %+v %v", ep, err)
	}
	if ep, err := readyAsked(ask, "127.0.0.1:9", 9, sock); err != nil || ep.Addr != "" {
		t.Errorf("-addr's port not yet open: %+v %v", ep, err)
	}
}

func FuzzParseListener(f *testing.F) {
	for _, s := range []string{"tcp 127.0.0.1:80", "udp [::1]:443", "tcp [::]:8080", "sctp 1.2.3.4:5", "tcp 1.2.3.4", "tcp host:80", "tcp 1.2.3.4:0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseListener(s)
		if err != nil {
			return
		}
		if l.Port <= 0 || l.Port > 65535 || l.IP == nil {
			t.Fatalf("%q: %+v", s, l)
		}
		again, err := ParseListener(map[bool]string{false: "tcp", true: "udp"}[l.UDP] + " " + l.Addr())
		if err != nil || again.Port != l.Port {
			t.Fatalf("%q: %+v does not read back: %v", s, l, err)
		}
	})
}
