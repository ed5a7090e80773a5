package probe

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// A round's results folder is read again after the round: probe ab's
// function tables read its profiles once every round has run, and a
// review reads them again to judge and annotate. The code of the other
// revision (a pull request's head) runs in between, as the same user: a
// head whose init() rewrote the base's profiles turned a failing review
// into a pass. Every round's files are pinned (their digests kept in
// memory) as soon as the round ended and its processes are gone, and the
// cached rounds of the base as the review checked them, before any head
// code ran; a pinned file that changed since ends the comparison.

// pin keeps the digest of every regular file under dir.
func (ab *abRun) pin(dir string) error {
	if ab.res.pins == nil {
		ab.res.pins = map[string][sha256.Size]byte{}
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ab.res.pins[p] = sha256.Sum256(b)
		return nil
	})
}

// ErrTampered is a results file that changed after it was pinned.
var ErrTampered = errors.New("a round's results changed after the round ended")

// CheckPins reads every pinned file again: one that changed, or is gone,
// is an ErrTampered naming it. Call it before reading what is judged.
func (r *ABResult) CheckPins() error {
	for _, p := range slices.Sorted(maps.Keys(r.pins)) {
		b, err := os.ReadFile(p)
		if err != nil || sha256.Sum256(b) != r.pins[p] {
			return fmt.Errorf("%w: %s (code that ran after it, the other revision's, may have written it): nothing is judged from it", ErrTampered, p)
		}
	}
	return nil
}
