package probe

import (
	"flag"
	"path/filepath"

	goldenfile "github.com/perfspy/perfspy/internal/golden"

	"slices"
	"testing"

	"github.com/perfspy/perfspy/load"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name; on a mismatch it writes got next
// to the golden file, so the two can be diffed.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got, *update)
}

// Too few successes or failed requests in any window make the run not
// judged, each window named once.
func TestWindowReasons(t *testing.T) {
	ok := &windowResult{load: &load.Result{OK: 100}}
	bad := &windowResult{load: &load.Result{OK: 90, Errors: 2, Non2xx: 1, FirstErr: "connection reset"}}
	got := windowReasons([]namedWindow{{"timing window", ok}, {"attribution window", bad}, {"copy window", nil}, {"off-CPU window", bad}}, 50)
	want := []string{"3 failed requests in the attribution window (first: connection reset)"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	few := &windowResult{load: &load.Result{OK: 7}}
	got = windowReasons([]namedWindow{{"timing window", ok}, {"attribution window", ok}, {"copy window", ok}, {"off-CPU window", few}}, 50)
	want = []string{"too few successful requests (100 in the timing window, 7 in the off-CPU window; need 50)"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := windowReasons([]namedWindow{{"timing window", ok}, {"attribution window", ok}}, 100); got != nil {
		t.Errorf("enough successes, no failures: %q", got)
	}
}
