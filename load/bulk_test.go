package load

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startBulk builds and starts a bulk target of this module with args and
// returns its UDP address.
func startBulk(t *testing.T, target string, args ...string) string {
	t.Helper()
	return startTarget(t, target, func(line string) (string, bool) {
		// "listening on udp 127.0.0.1:port mode push"
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "listening" {
			return f[3], true
		}
		return "", false
	}, args...)
}

// startTarget builds and starts a target of this module with args and
// returns the address that addr finds in a line of its standard error.
func startTarget(t *testing.T, target string, addr func(line string) (string, bool), args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(target))
	if out, err := exec.Command("go", "build", "-o", bin, target).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", target, err, out)
	}
	cmd := exec.Command(bin, args...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if a, ok := addr(sc.Text()); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return a
		}
	}
	t.Fatalf("%s never said where it listens", target)
	return ""
}

// Both bulk drivers complete push and echo transfers of sizes that do and
// do not fill their last datagram, and count datagrams in both directions;
// a target that breaks one byte per transfer fails every transfer.
func TestBulkDrivers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the bulk targets; skipped with -short")
	}
	const size = 256<<10 + 5
	for _, target := range []string{"../targets/quicecho", "../targets/udpfloor"} {
		for _, mode := range []string{"push", "echo"} {
			t.Run(filepath.Base(target)+"/"+mode, func(t *testing.T) {
				addr := startBulk(t, target, "-mode="+mode)
				var d Driver
				var err error
				if strings.HasSuffix(target, "quicecho") {
					d, err = NewQUIC(QUICOptions{Addr: addr, Conns: 2, Streams: 2, Size: size})
				} else {
					d, err = NewUDP(UDPOptions{Addr: addr, Conns: 2, Size: size, Pkt: 1252})
				}
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := d.RunN(ctx, 4); err != nil { // connections, before the counted phase
					t.Fatal(err)
				}
				r, err := d.RunN(ctx, 20)
				if err != nil || r.OK != 20 || r.Errors != 0 {
					t.Fatalf("20 transfers: %+v %v", r, err)
				}
				if r.Dials != 0 {
					t.Errorf("%d dials in the second phase", r.Dials)
				}
				// Data datagrams one way: at least size over the largest
				// payload; an echo brings as many back.
				min := int64(20 * (size / 1500))
				if mode == "echo" {
					min *= 2
				}
				perDatagram := float64(r.DatagramBytes) / float64(r.Datagrams)
				t.Logf("%d datagrams per transfer, %.0f bytes each", r.Datagrams/20, perDatagram)
				if r.Datagrams < min || perDatagram < 500 || perDatagram > 1500 {
					t.Errorf("%d datagrams of %.0f bytes for 20 transfers of %d bytes", r.Datagrams, perDatagram, size)
				}
				if _, ok := d.(*UDP); ok {
					want := int64(20 * 213) // ceil(262149/1236) = 213 datagrams sent
					if mode == "echo" {
						want *= 2
					} else {
						want += 20 // and one reply each
					}
					if r.Datagrams != want {
						t.Errorf("udp: %d datagrams, want exactly %d", r.Datagrams, want)
					}
				}

				bad := startBulk(t, target, "-mode="+mode, "-corrupt-at=100000")
				var bd Driver
				if strings.HasSuffix(target, "quicecho") {
					bd, _ = NewQUIC(QUICOptions{Addr: bad, Size: size})
				} else {
					bd, _ = NewUDP(UDPOptions{Addr: bad, Size: size})
				}
				defer bd.Close()
				r, err = bd.RunN(ctx, 3)
				if err != nil || r.OK != 0 || r.Errors != 3 || !strings.Contains(r.FirstErr, ErrBadTransfer.Error()) {
					t.Errorf("one wrong byte per transfer: %+v %v", r, err)
				}
			})
		}
	}
}

// TestUDPWithoutGSO: on a kernel that refuses UDP GSO the driver sends
// with sendmmsg; the server reads the same datagrams.
func TestUDPWithoutGSO(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts targets/udpfloor; skipped with -short")
	}
	const size = 100<<10 + 7
	addr := startBulk(t, "../targets/udpfloor", "-mode=push")
	d, err := NewUDP(UDPOptions{Addr: addr, Size: size, Pkt: 1252})
	if err != nil {
		t.Fatal(err)
	}
	d.noGSO = true
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := d.RunN(ctx, 10)
	if err != nil || r.OK != 10 || r.Errors != 0 {
		t.Fatalf("10 transfers: %+v %v", r, err)
	}
	if s, _ := d.sock(0); s.gso != nil {
		t.Error("GSO used although turned off")
	}
	if want := int64(10 * (83 + 1)); r.Datagrams != want { // ceil(102407/1236) = 83, and a reply
		t.Errorf("%d datagrams, want %d", r.Datagrams, want)
	}
}

func TestBulkBadOptions(t *testing.T) {
	if _, err := NewQUIC(QUICOptions{}); err == nil {
		t.Error("QUIC without an address")
	}
	if _, err := NewQUIC(QUICOptions{Addr: "127.0.0.1:1", Size: -1}); err == nil {
		t.Error("QUIC with a negative size")
	}
	if _, err := NewUDP(UDPOptions{Addr: "127.0.0.1:1", Pkt: 10}); err == nil {
		t.Error("UDP with datagrams shorter than their header")
	}
	if !errors.Is(newEchoChecker(10).done(), ErrBadTransfer) {
		t.Error("nothing back is a good transfer")
	}
}
