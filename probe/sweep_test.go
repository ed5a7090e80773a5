package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("2M,1K, 64k,1024,1m")
	if err != nil || !reflect.DeepEqual(got, []int64{1 << 10, 64 << 10, 1 << 20, 2 << 20}) {
		t.Errorf("parseSizes: %v %v", got, err)
	}
	for _, bad := range []string{"", "0", "-1K", "1G", "2048M", "x"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q): no error", bad)
		}
	}
	if report.SizeName(1<<10) != "1K" || report.SizeName(2<<20) != "2M" || report.SizeName(1500) != "1500" {
		t.Error("SizeName")
	}
}

// probe bulk: one row per size with push, echo and the floor, the first
// round dropped; echo carries about twice push's datagrams; the ratios
// are the cells' quotients.
func TestSweep(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "bulk")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"bulk", "-q", "-sizes", "64K,256K", "-rounds", "2", "-duration", "700ms", "-warmup", "200ms",
		"-out", out}, &stdout, &stderr)
	checkNoOrphans(t)
	if code != ExitOK && code != ExitNotJudged {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	var res SweepResult
	b, err := os.ReadFile(filepath.Join(out, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Schema != SweepSchema || len(res.Rows) != 2 || res.Rows[0].Size != 64<<10 || res.Rows[1].Size != 256<<10 {
		t.Fatalf("sweep.json: %s", b)
	}
	for _, row := range res.Rows {
		t.Logf("%s: push %.1f, echo %.1f, floor %.1f µs/MB; datagrams %.1f / %.1f / %.1f", report.SizeName(row.Size),
			row.Push.CPUUSPerMB, row.Echo.CPUUSPerMB, row.Floor.CPUUSPerMB, row.Push.DatagramsPerRequest, row.Echo.DatagramsPerRequest, row.Floor.DatagramsPerRequest)
		for _, c := range []schema.SweepCell{row.Push, row.Echo, row.Floor} {
			if len(c.Rounds) != 1 || c.CPUUSPerMB <= 0 {
				t.Errorf("%s: cell %+v, want one kept round", report.SizeName(row.Size), c)
			}
		}
		if row.Echo.DatagramsPerRequest < 1.6*row.Push.DatagramsPerRequest {
			t.Errorf("%s: echo %.1f datagrams, push %.1f", report.SizeName(row.Size), row.Echo.DatagramsPerRequest, row.Push.DatagramsPerRequest)
		}
		// The floor sends the transfer in datagrams of push's largest, and
		// gets one reply.
		if row.Floor.DatagramsPerRequest < float64(row.Size)/1500 {
			t.Errorf("%s: floor %.1f datagrams", report.SizeName(row.Size), row.Floor.DatagramsPerRequest)
		}
		if r := row.Push.CPUUSPerMB / row.Floor.CPUUSPerMB; abs(r-row.PushRatio) > 0.01 {
			t.Errorf("%s: push/floor %.3f, cells say %.3f", report.SizeName(row.Size), row.PushRatio, r)
		}
	}
	if !strings.Contains(stdout.String(), "| size | push min | echo min | floor |") {
		t.Errorf("report:\n%s", stdout.String())
	}
	runs, _ := os.ReadDir(filepath.Join(out, "runs"))
	if len(runs) != 2*2*3 {
		t.Errorf("%d runs, want 12", len(runs))
	}
	if code == ExitNotJudged && len(res.Reasons) == 0 {
		t.Error("exit 3 with no reason")
	}
	_, err = Sweep(context.Background(), SweepConfig{Rounds: 1, Out: filepath.Join(t.TempDir(), "x"), Run: Config{WindowConfig: WindowConfig{Duration: time.Second}}}, nil)
	if err == nil || errors.Is(err, ErrNotJudged) {
		t.Errorf("one round: %v", err)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
