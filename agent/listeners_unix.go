//go:build linux || darwin

package agent

import (
	"net"
	"strconv"
	"syscall"
)

// maxFD bounds the descriptors listeners looks at: a server's listening
// sockets are opened at its start, among its first descriptors.
const maxFD = 4096

// listeners are the process's own listening sockets, as "tcp HOST:PORT"
// or "udp HOST:PORT": TCP sockets that accept connections and UDP
// sockets bound to a port with no peer. probe asks where /proc cannot
// tell it (macOS); the answer needs no privilege and no other process.
func listeners() []string {
	var out []string
	for fd := 0; fd < maxFD; fd++ {
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			continue
		}
		typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
		if err != nil {
			continue
		}
		proto := ""
		switch typ {
		case syscall.SOCK_STREAM:
			if v, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err != nil || v == 0 {
				continue
			}
			proto = "tcp"
		case syscall.SOCK_DGRAM:
			if _, err := syscall.Getpeername(fd); err == nil {
				continue // a client's
			}
			proto = "udp"
		default:
			continue
		}
		var ip net.IP
		var port int
		switch a := sa.(type) {
		case *syscall.SockaddrInet4:
			ip, port = net.IP(a.Addr[:]), a.Port
		case *syscall.SockaddrInet6:
			ip, port = net.IP(a.Addr[:]), a.Port
		default:
			continue // the agent's own unix socket, and others
		}
		if port == 0 {
			continue
		}
		out = append(out, proto+" "+net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	}
	return out
}
