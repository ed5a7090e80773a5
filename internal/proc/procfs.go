package proc

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// procRoot is where the proc file system is mounted.
const procRoot = "/proc"

// Listener is a TCP socket in the LISTEN state, or a UDP socket bound to
// a port and connected to no peer (a server's).
type Listener struct {
	IP    net.IP
	Port  int
	Inode uint64
	UDP   bool
}

// Addr is the address a client on this machine dials to reach l.
func (l Listener) Addr() string {
	ip := l.IP
	if ip.IsUnspecified() {
		if ip.To4() != nil {
			ip = net.IPv4(127, 0, 0, 1)
		} else {
			ip = net.IPv6loopback
		}
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(l.Port))
}

// ParseNetTCP reads /proc/net/tcp or tcp6 and returns the sockets in
// the LISTEN state.
func ParseNetTCP(r io.Reader) ([]Listener, error) { return parseProcNet(r, false) }

// ParseNetUDP reads /proc/net/udp or udp6 and returns the sockets
// bound to a port with no peer.
func ParseNetUDP(r io.Reader) ([]Listener, error) { return parseProcNet(r, true) }

func parseProcNet(r io.Reader, udp bool) ([]Listener, error) {
	var out []Listener
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue // header
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			return nil, fmt.Errorf("short line %q", sc.Text())
		}
		if udp {
			// 07 is TCP_CLOSE, the state of every unconnected UDP socket.
			if f[3] != "07" || strings.Trim(f[2], "0:") != "" {
				continue
			}
		} else if f[3] != "0A" {
			continue
		}
		ip, port, err := parseHexAddr(f[1])
		if err != nil {
			return nil, err
		}
		if port == 0 {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad inode %q: %w", f[9], err)
		}
		out = append(out, Listener{IP: ip, Port: port, Inode: ino, UDP: udp})
	}
	return out, sc.Err()
}

// parseHexAddr decodes "0100007F:1F90": the address as 32-bit words in host
// (little-endian) order, the port big-endian.
func parseHexAddr(s string) (net.IP, int, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, fmt.Errorf("bad address %q", s)
	}
	b, err := hex.DecodeString(host)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, 0, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return nil, 0, fmt.Errorf("bad port in %q", s)
	}
	return net.IP(b), int(p), nil
}

// socketInodes returns the inodes of the sockets pid holds open.
func socketInodes(pid int) map[uint64]bool {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[uint64]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"), 10, 64)
		if err == nil {
			out[ino] = true
		}
	}
	return out
}

// netListeners returns the listening TCP sockets of pid's network namespace.
func netListeners(pid int) ([]Listener, error) {
	var all []Listener
	for _, name := range []string{"tcp", "tcp6", "udp", "udp6"} {
		f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "net", name))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		ls, err := parseProcNet(f, strings.HasPrefix(name, "udp"))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading /proc/%d/net/%s: %w", pid, name, err)
		}
		all = append(all, ls...)
	}
	return all, nil
}

// Listeners returns the listeners held by each of pids.
func Listeners(pids []int) (map[int][]Listener, error) {
	if len(pids) == 0 {
		return nil, nil
	}
	all, err := netListeners(pids[0])
	if err != nil {
		return nil, err
	}
	out := map[int][]Listener{}
	for _, pid := range pids {
		inodes := socketInodes(pid)
		for _, l := range all {
			if inodes[l.Inode] {
				out[pid] = append(out[pid], l)
			}
		}
	}
	return out, nil
}

// AllPIDs lists the processes in /proc.
func AllPIDs() []int {
	ents, _ := os.ReadDir(procRoot)
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// GroupPIDs lists the processes whose process group is pgid.
func GroupPIDs(pgid int) []int {
	var out []int
	for _, pid := range AllPIDs() {
		st, err := ReadStat(pid)
		if err == nil && st.pgrp == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// PortOwners returns the pids, system-wide, that hold a listening socket on port.
func PortOwners(port int, self int) ([]int, error) {
	all, err := netListeners(self)
	if err != nil {
		return nil, err
	}
	want := map[uint64]bool{}
	for _, l := range all {
		if l.Port == port {
			want[l.Inode] = true
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	var out []int
	for _, pid := range AllPIDs() {
		for ino := range socketInodes(pid) {
			if want[ino] {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

type procStat struct {
	state        byte
	ppid, pgrp   int
	utime, stime uint64 // clock ticks
}

// ReadStat parses /proc/PID/stat. The command name may hold spaces and
// parentheses, so fields are counted from the last ')'.
func ReadStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return ParseStat(b)
}

// ThreadsIdle tells whether every thread of pid sleeps: none runs or waits
// to run. Under callgrind, whose threads take turns, the target is then
// parked with no work left.
func ThreadsIdle(pid int) bool {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		st, err := ParseStat(b)
		if err != nil || st.state == 'R' {
			return false
		}
		// A thread in nanosleep is the runtime's sysmon between two looks
		// at the scheduler: it parks (in a futex) once it has seen every P
		// idle. Waiting for that makes each request find sysmon parked.
		if sc, err := os.ReadFile(filepath.Join(dir, e.Name(), "syscall")); err == nil && bytes.HasPrefix(sc, []byte("35 ")) {
			return false
		}
	}
	return true
}

func ParseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("bad stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("short stat line")
	}
	var st procStat
	st.state = f[0][0]
	var errs [4]error
	st.ppid, errs[3] = strconv.Atoi(f[1])
	st.pgrp, errs[0] = strconv.Atoi(f[2])
	st.utime, errs[1] = strconv.ParseUint(f[11], 10, 64)
	st.stime, errs[2] = strconv.ParseUint(f[12], 10, 64)
	for _, e := range errs {
		if e != nil {
			return procStat{}, fmt.Errorf("bad stat line: %w", e)
		}
	}
	return st, nil
}

// clockTicks is USER_HZ, 100 on every Linux configuration that Go supports.
const clockTicks = 100

// CPUReading is a process's CPU time so far, with its source.
type CPUReading struct {
	Nanos  uint64
	Source string
	// WaitNanos is the time the threads waited in a run queue, ready to
	// run while other work had the CPU (schedstat's second field; 0 from
	// /proc/PID/stat): a busy machine, not the server.
	WaitNanos uint64
}

// ReadCPU sums the on-CPU time of pid's threads from their schedstat files
// (nanoseconds), falling back to utime+stime from /proc/PID/stat (ticks).
func ReadCPU(pid int) (CPUReading, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(dir)
	if err == nil {
		var sum, wait uint64
		ok := len(ents) > 0
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
			if err != nil {
				if os.IsNotExist(err) && sum > 0 {
					continue // thread exited while we read
				}
				ok = false
				break
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				ok = false
				break
			}
			n, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				ok = false
				break
			}
			sum += n
			if len(f) > 1 {
				w, _ := strconv.ParseUint(f[1], 10, 64)
				wait += w
			}
		}
		if ok {
			return CPUReading{Nanos: sum, Source: "schedstat", WaitNanos: wait}, nil
		}
	}
	st, err := ReadStat(pid)
	if err != nil {
		return CPUReading{}, err
	}
	return CPUReading{Nanos: (st.utime + st.stime) * (1e9 / clockTicks), Source: "proc-stat"}, nil
}

// DescendantsCPU sums the on-CPU time (ReadCPU) of every process that
// descends from pid, pid itself left out: a target's own child processes,
// whose time is the target's work, not another process's. A child that
// ended between two readings takes its time with it.
func DescendantsCPU(pid int) uint64 {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return 0
	}
	children := map[int][]int{}
	for _, e := range ents {
		q, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(q); err == nil {
			children[st.ppid] = append(children[st.ppid], q)
		}
	}
	var sum uint64
	queue := slices.Clone(children[pid])
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		if seen[q] {
			continue
		}
		seen[q] = true
		if r, err := ReadCPU(q); err == nil {
			sum += r.Nanos
		}
		queue = append(queue, children[q]...)
	}
	return sum
}

// IOReading holds the read/write family syscall counters of /proc/PID/io.
type IOReading struct {
	SysR, SysW uint64
}

func ReadIO(pid int) (IOReading, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "io"))
	if err != nil {
		return IOReading{}, err
	}
	return ParseIO(b)
}

func ParseIO(b []byte) (IOReading, error) {
	var r IOReading
	var seen int
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "syscr":
			r.SysR = n
			seen++
		case "syscw":
			r.SysW = n
			seen++
		}
	}
	if seen != 2 {
		return r, fmt.Errorf("no syscr/syscw in io file")
	}
	return r, nil
}

// AllowedCPUs returns the Cpus_allowed_list of every thread of pid,
// deduplicated and sorted.
func AllowedCPUs(pid int) ([]string, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				seen[strings.TrimSpace(v)] = true
			}
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// UDPCounters reads the UDP line pair of /proc/net/snmp: the
// machine's (the network namespace's) datagrams and drops, every socket's.
func UDPCounters() (map[string]int64, error) {
	f, err := os.Open(filepath.Join(procRoot, "net", "snmp"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseSNMP(f, "Udp")
}

// ParseSNMP reads the counters of proto from /proc/net/snmp: a line of
// names and a line of values, each starting "Proto:".
func ParseSNMP(r io.Reader, proto string) (map[string]int64, error) {
	sc := bufio.NewScanner(r)
	var names []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != proto+":" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		if len(f)-1 != len(names) {
			return nil, fmt.Errorf("/proc/net/snmp: %d %s values for %d names", len(f)-1, proto, len(names))
		}
		out := make(map[string]int64, len(names))
		for i, n := range names {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/net/snmp: %s %s: %w", proto, n, err)
			}
			out[n] = v
		}
		return out, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("/proc/net/snmp: no %s counters", proto)
}

// CounterDelta is b - a for the counters in both; nil when either is.
func CounterDelta(a, b map[string]int64) map[string]int64 {
	if a == nil || b == nil {
		return nil
	}
	out := map[string]int64{}
	for k, v := range b {
		if v0, ok := a[k]; ok {
			out[k] = v - v0
		}
	}
	return out
}

// Machine is what the machine did while a window ran, read at both of
// its ends: how busy it was as a whole, how long this process's own
// threads (the load driver) waited for a CPU, and the CPU pressure the
// kernel measures (PSI).
type Machine struct {
	BusyTicks  uint64 // every CPU's non-idle time so far (/proc/stat), in clock ticks
	SelfWaitNS uint64 // this process's threads' run-queue wait so far (schedstat)
	PressureUS uint64 // /proc/pressure/cpu "some" total: µs in which a runnable task waited
	Pressure   bool   // PSI was readable
}

// ReadMachine reads the machine's counters now.
func ReadMachine() Machine {
	var m Machine
	if b, err := os.ReadFile(filepath.Join(procRoot, "stat")); err == nil {
		m.BusyTicks = parseBusyTicks(b)
	}
	if r, err := ReadCPU(os.Getpid()); err == nil {
		m.SelfWaitNS = r.WaitNanos
	}
	if b, err := os.ReadFile(filepath.Join(procRoot, "pressure", "cpu")); err == nil {
		m.PressureUS, m.Pressure = parsePressure(b)
	}
	return m
}

// parseBusyTicks sums the non-idle fields of /proc/stat's "cpu" line:
// user nice system irq softirq steal (idle and iowait left out; guest
// time is inside user already).
func parseBusyTicks(b []byte) uint64 {
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var sum uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseUint(f[i], 10, 64)
		sum += v
	}
	return sum
}

// parsePressure reads "some ... total=N" from /proc/pressure/cpu.
func parsePressure(b []byte) (uint64, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// MachineWindow is what the machine did in a window, per second of it.
type MachineWindow struct {
	BusyCores   float64 // every process's CPU, in cores
	DriverWait  float64 // s per s this process's threads waited for a CPU
	Pressure    float64 // share of the window in which some runnable task waited (PSI), -1 when unknown
	WindowNanos int64
}

// Since is the machine's figures from m0 to m over secs seconds.
func (m Machine) Since(m0 Machine, secs float64) MachineWindow {
	w := MachineWindow{Pressure: -1, WindowNanos: int64(secs * 1e9)}
	if secs <= 0 {
		return w
	}
	if m.BusyTicks >= m0.BusyTicks {
		w.BusyCores = float64(m.BusyTicks-m0.BusyTicks) / clockTicks / secs
	}
	if m.SelfWaitNS >= m0.SelfWaitNS {
		w.DriverWait = float64(m.SelfWaitNS-m0.SelfWaitNS) / 1e9 / secs
	}
	if m.Pressure && m0.Pressure && m.PressureUS >= m0.PressureUS {
		w.Pressure = float64(m.PressureUS-m0.PressureUS) / 1e6 / secs
	}
	return w
}
