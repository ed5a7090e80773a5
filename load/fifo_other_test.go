//go:build !unix

package load

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs here") }
