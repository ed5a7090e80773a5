package load

import "golang.org/x/sys/unix"

// setSegment sets UDP_SEGMENT (generic segmentation offload) on fd.
func setSegment(fd, size int) error {
	return unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, size)
}
