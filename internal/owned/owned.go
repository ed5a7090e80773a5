// Package owned marks a temporary folder with the process that made it, so
// that a later run can remove the folders a killed run (SIGKILL, a crash)
// left behind without touching those of a run still going.
package owned

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// File names the file, in an owned folder, that holds the owner's process
// id.
const File = "owner.pid"

// Claim writes the current process's id into dir.
func Claim(dir string) error {
	return os.WriteFile(filepath.Join(dir, File), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// Alive reports whether the run that owns dir is running. A folder whose
// owner file cannot be read has no owner alive.
func Alive(dir string) bool {
	pid := owner(dir)
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Mine reports whether the current process owns dir.
func Mine(dir string) bool { return owner(dir) == os.Getpid() }

// owner is the process id dir's owner file holds, 0 when it holds none.
func owner(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// unclaimedGrace is how long a folder without an owner file is left alone:
// its run may be between making it and claiming it.
const unclaimedGrace = time.Hour

// RemoveStale removes the folders in root named with prefix whose owner
// is gone: a folder with an owner file whose process is not running, or
// one without an owner file older than an hour. Only folders (never
// links) right in root are looked at.
func RemoveStale(root, prefix string) error {
	ents, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if !stale(dir) {
			continue
		}
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

func stale(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, File)); err != nil {
		fi, err := os.Lstat(dir)
		return err == nil && time.Since(fi.ModTime()) > unclaimedGrace
	}
	return !Alive(dir)
}
