//go:build !linux

package load

import "errors"

// setSegment fails: UDP segmentation offload is Linux's.
func setSegment(fd, size int) error {
	return errors.New("UDP_SEGMENT is not available on this platform")
}
