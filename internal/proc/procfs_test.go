package proc

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

const sampleTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1060 1 0000000063025a40 100 0 0 10 0
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2222 1 0000000063025a40 100 0 0 10 0
   2: 020200C0:DB68 507100CB:01BB 06 00000000:00000000 03:00000E06 00000000     0        0 0 3 00000000182cfd1f
`

const sampleTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3333 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 100 0 0 10 0
`

func TestParseProcNetTCP(t *testing.T) {
	ls, err := ParseNetTCP(strings.NewReader(sampleTCP))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		addr  string
		inode uint64
	}{{"127.0.0.1:2024", 1060}, {"127.0.0.1:8080", 2222}}
	if len(ls) != len(want) {
		t.Fatalf("got %d listeners, want %d: %+v", len(ls), len(want), ls)
	}
	for i, w := range want {
		if ls[i].Addr() != w.addr || ls[i].Inode != w.inode {
			t.Errorf("listener %d = %s inode %d, want %s inode %d", i, ls[i].Addr(), ls[i].Inode, w.addr, w.inode)
		}
	}
	if !ls[0].IP.Equal(net.IPv4zero) {
		t.Errorf("listener 0 IP = %v, want 0.0.0.0", ls[0].IP)
	}

	ls6, err := ParseNetTCP(strings.NewReader(sampleTCP6))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls6) != 2 || ls6[0].Addr() != "[::1]:8081" || ls6[1].Addr() != "[::1]:80" {
		t.Errorf("tcp6 listeners = %+v", ls6)
	}
}

// A bound UDP socket with no peer is a listener; a connected one is not.
func TestParseProcNetUDP(t *testing.T) {
	const sample = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  123: 0100007F:A1B2 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 5555 2 0000000000000000 0
  124: 0100007F:C001 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 6666 2 0000000000000000 0
`
	ls, err := ParseNetUDP(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Addr() != "127.0.0.1:41394" || !ls[0].UDP || ls[0].Inode != 5555 {
		t.Errorf("udp listeners = %+v", ls)
	}
	tcp, _ := ParseNetTCP(strings.NewReader(sampleTCP))
	if len(tcp) == 0 || tcp[0].UDP {
		t.Errorf("tcp listeners = %+v", tcp)
	}
}

func TestParseProcNetTCPErrors(t *testing.T) {
	for _, in := range []string{
		"header\n 0: zz:1F90 0:0 0A a b c d e 1\n",
		"header\n 0: 0100007F 0:0 0A a b c d e 1\n",
		"header\n 0: 0100007F:1F90 0:0 0A a b c d e notanumber\n",
		"header\nshort line\n",
	} {
		if _, err := ParseNetTCP(strings.NewReader(in)); err == nil {
			t.Errorf("ParseNetTCP(%q): no error", in)
		}
	}
}

func FuzzParseProcNetTCP(f *testing.F) {
	f.Add(sampleTCP)
	f.Add(sampleTCP6)
	f.Fuzz(func(t *testing.T, s string) {
		// Each parser reads the addresses of the states it keeps only.
		tcp, _ := ParseNetTCP(strings.NewReader(s))
		udp, _ := ParseNetUDP(strings.NewReader(s))
		for _, l := range append(tcp, udp...) {
			if l.Port < 0 || l.Port > 65535 {
				t.Fatalf("port %d out of range", l.Port)
			}
			if len(l.IP) != 4 && len(l.IP) != 16 {
				t.Fatalf("ip %v has %d bytes", l.IP, len(l.IP))
			}
			_ = l.Addr()
		}
	})
}

func TestParseStat(t *testing.T) {
	st, err := ParseStat([]byte("4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 12 0 0 20 0 5 0 1234 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if st.state != 'S' || st.pgrp != 4242 || st.utime != 37 || st.stime != 12 {
		t.Errorf("ParseStat = %+v", st)
	}
	if _, err := ParseStat([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("short stat: no error")
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 100 0 0 0 37 12 0 0 20 0 1 0 5 0 0\n"))
	f.Add([]byte("2 (a) b) R 1 2 2 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseStat(b)
	})
}

func TestParseIO(t *testing.T) {
	r, err := ParseIO([]byte("rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 3\nread_bytes: 0\n"))
	if err != nil || r.SysR != 10 || r.SysW != 3 {
		t.Fatalf("ParseIO = %+v, %v", r, err)
	}
	if _, err := ParseIO([]byte("rchar: 1\n")); err == nil {
		t.Error("no syscr: no error")
	}
}

// TestLoopbackAddr: a dual-stack [::] listener (Go's ":0") is loaded at
// 127.0.0.1; an IPv6-only one at [::1].
func TestLoopbackAddr(t *testing.T) {
	for _, c := range []struct{ network, addr, want string }{{"tcp", ":0", "127.0.0.1"}, {"tcp6", "[::]:0", "::1"}, {"tcp4", "127.0.0.1:0", "127.0.0.1"}} {
		ln, err := net.Listen(c.network, c.addr)
		if err != nil {
			t.Logf("skipped %s %s: %v", c.network, c.addr, err)
			continue
		}
		port := ln.Addr().(*net.TCPAddr).Port
		byPID, err := Listeners([]int{os.Getpid()})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range byPID[os.Getpid()] {
			if l.Port == port {
				found = true
				if got := LoopbackAddr(l); got != net.JoinHostPort(c.want, strconv.Itoa(port)) {
					t.Errorf("%s %s: load goes to %s, want %s", c.network, c.addr, got, c.want)
				}
			}
		}
		if !found {
			t.Errorf("%s %s: port %d not among the listeners", c.network, c.addr, port)
		}
		ln.Close()
	}
}

// The live readers are checked against this process, whose facts are known.
func TestLiveProc(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	self := os.Getpid()
	byPID, err := Listeners([]int{self})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range byPID[self] {
		if l.Port == port {
			found = true
		}
	}
	if !found {
		t.Errorf("listener on port %d not found among %+v", port, byPID[self])
	}
	owners, err := PortOwners(port, self)
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 1 || owners[0] != self {
		t.Errorf("PortOwners(%d) = %v, want [%d]", port, owners, self)
	}
	if err := CheckOwners(port, owners, []int{self + 1}); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("CheckOwners with a foreign owner: %v", err)
	}
	if err := CheckOwners(port, []int{self, self + 1}, []int{self, self + 1}); err == nil || !strings.Contains(err.Error(), "listening processes") {
		t.Errorf("CheckOwners with two owners: %v", err)
	}
	cpu, err := ReadCPU(self)
	if err != nil || cpu.Nanos == 0 {
		t.Errorf("ReadCPU = %+v, %v", cpu, err)
	}
	if _, err := ReadIO(self); err != nil {
		t.Errorf("ReadIO: %v", err)
	}
	st, err := ReadStat(self)
	if err != nil {
		t.Fatal(err)
	}
	pids := GroupPIDs(st.pgrp)
	in := false
	for _, p := range pids {
		in = in || p == self
	}
	if !in {
		t.Errorf("GroupPIDs(%d) = %v lacks %d", st.pgrp, pids, self)
	}
}

func TestParseSNMP(t *testing.T) {
	const sample = `Ip: Forwarding DefaultTTL
Ip: 1 64
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 9301417 14 8718 2028850 8718 0 0 0 0
UdpLite: InDatagrams NoPorts
UdpLite: 0 0
`
	m, err := ParseSNMP(strings.NewReader(sample), "Udp")
	if err != nil || m["InDatagrams"] != 9301417 || m["RcvbufErrors"] != 8718 || len(m) != 9 {
		t.Errorf("Udp counters %v, %v", m, err)
	}
	for _, bad := range []string{"Udp: A B\nUdp: 1\n", "Udp: A\nUdp: x\n", "Ip: 1\n"} {
		if _, err := ParseSNMP(strings.NewReader(bad), "Udp"); err == nil {
			t.Errorf("ParseSNMP(%q): no error", bad)
		}
	}
	if d := CounterDelta(map[string]int64{"a": 1, "b": 2}, map[string]int64{"a": 5}); len(d) != 1 || d["a"] != 4 {
		t.Errorf("delta %v", d)
	}
}

func FuzzParseSNMP(f *testing.F) {
	f.Add("Udp: InDatagrams NoPorts\nUdp: 1 2\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseSNMP(strings.NewReader(s), "Udp")
		if err == nil && m == nil {
			t.Error("no error and no counters")
		}
	})
}

func TestParseMachine(t *testing.T) {
	stat := "cpu  100 5 50 1000 20 7 3 2 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
	if got := parseBusyTicks([]byte(stat)); got != 100+5+50+7+3+2 {
		t.Errorf("busy ticks %d", got)
	}
	psi := "some avg10=5.38 avg60=9.27 avg300=10.19 total=128324533\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	if v, ok := parsePressure([]byte(psi)); !ok || v != 128324533 {
		t.Errorf("pressure %d %v", v, ok)
	}
	m0 := Machine{BusyTicks: 1000, SelfWaitNS: 0, PressureUS: 0, Pressure: true}
	m1 := Machine{BusyTicks: 1000 + 300, SelfWaitNS: 1e9, PressureUS: 500000, Pressure: true}
	w := m1.Since(m0, 2)
	if w.BusyCores != 1.5 || w.DriverWait != 0.5 || w.Pressure != 0.25 {
		t.Errorf("%+v", w)
	}
	if w := m1.Since(Machine{}, 2); w.Pressure != -1 {
		t.Errorf("pressure without PSI at the start: %v", w.Pressure)
	}
}
