// Package outfile writes a command's output file without destroying its
// input: an output that is one of the inputs (the same file, by any
// name or link) is refused, and the file is replaced whole or not at all.
package outfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// SameAsInput refuses out when it is one of inputs (store addresses and
// "-" are not files and are skipped by the caller).
func SameAsInput(flag, out string, inputs []string) error {
	ost, err := os.Stat(out)
	if err != nil {
		return nil // not there yet: no input can be it
	}
	for _, in := range inputs {
		if ist, err := os.Stat(in); err == nil && os.SameFile(ost, ist) {
			return fmt.Errorf("%s %s is the input %s: refusing to overwrite it", flag, out, in)
		}
	}
	return nil
}

// Write writes b to path through a temporary file in its folder, so that
// a failed write leaves the old file as it was.
func Write(path string, b []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
