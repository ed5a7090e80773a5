//go:build unix && !linux

package bulk

import "syscall"

// setBuffers asks for n-byte buffers: only Linux can force past the
// system's maximum.
func setBuffers(fd, n int) error {
	var serr error
	for _, o := range []int{syscall.SO_RCVBUF, syscall.SO_SNDBUF} {
		if e := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, o, n); e != nil {
			serr = e
		}
	}
	return serr
}
