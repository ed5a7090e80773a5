package bulk

import "golang.org/x/sys/unix"

// setBuffers forces the buffers past net.core.rmem_max and wmem_max when
// the process has CAP_NET_ADMIN, else asks within them.
func setBuffers(fd, n int) error {
	var serr error
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], n) != nil {
			if e := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], n); e != nil {
				serr = e
			}
		}
	}
	return serr
}
