package probe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/schema"
)

// TestNoAnswerEndsWindows: a server where 1 request in 500 never answers
// (and, with leak=1, where every request also starts a goroutine that
// never ends) kept probe run past 150 s, window after window, on the
// driver's 30 s request timeout. Every window now ends at its deadline
// and drain allowance: the results are written, the requests abandoned
// named, and the run not judged (exit 3).
func TestNoAnswerEndsWindows(t *testing.T) {
	skipShort(t)
	for _, path := range []string{"/noanswer?every=500", "/noanswer?every=500&leak=1"} {
		out := filepath.Join(t.TempDir(), "out")
		start := time.Now()
		code, stdout, stderr := probeRun(t, "-out", out, "-path", path, "-warmup", "300ms", "-duration", "2s", "-exact-duration", "1s", "-retained=false", "-offcpu=false", "-wallclock=false", "./testdata/probetarget")
		took := time.Since(start)
		t.Logf("%s: exit %d after %v", path, code, took.Round(time.Second))
		if code != ExitNotJudged || took > 100*time.Second {
			t.Errorf("%s: exit %d after %v; want %d well within 100 s\n%s%s", path, code, took, ExitNotJudged, stdout, stderr)
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var s schema.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		reasons := strings.Join(s.Reasons, "; ")
		if !strings.Contains(reasons, "were abandoned") {
			t.Errorf("%s: reasons %q do not name the requests abandoned", path, s.Reasons)
		}
		// The server ends the abandoned requests: not net/http's fault.
		if strings.Contains(reasons, "request boundaries") {
			t.Errorf("%s: reasons %q blame the request boundaries for requests the driver abandoned", path, s.Reasons)
		}
	}
}
