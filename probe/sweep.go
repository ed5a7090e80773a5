package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/internal/srcroot"
	"github.com/perfspy/perfspy/report"
	"github.com/perfspy/perfspy/schema"
)

// SweepSchema is the schema name of sweep.json.
const SweepSchema = schema.SweepSchema

// DefaultSweepSizes are probe bulk's transfer sizes: 1 KiB to 2 MiB.
var DefaultSweepSizes = []int64{1 << 10, 64 << 10, 1 << 20, 2 << 20}

// SweepConfig is one probe bulk: for each size, rounds of push, echo and
// the UDP floor, each a fresh target and fresh connections (the congestion
// window belongs to the connection).
type SweepConfig struct {
	Run    Config  // the QUIC target and the run settings; Args gets -mode
	Sizes  []int64 // default DefaultSweepSizes
	Rounds int     // per size and mode, the first dropped; default 3
	Out    string  // default results/bulk_<target>
}

// SweepResult is sweep.json, and the results folder.
type SweepResult struct {
	schema.SweepResult
	Dir string `json:"-"`
}

// Sweep measures push, echo and the UDP floor at each size and writes
// sweep.json and report.md.
func Sweep(ctx context.Context, cfg SweepConfig, logf func(string, ...any)) (*SweepResult, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = DefaultSweepSizes
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	if cfg.Rounds < 2 {
		return nil, fmt.Errorf("-rounds %d: the first round is dropped, so at least 2", cfg.Rounds)
	}
	root, err := srcroot.Dir()
	if err != nil {
		return nil, err
	}
	if cfg.Run.Target == "" || cfg.Run.Target == DefaultTarget {
		// perfspy's own QUIC target, from any directory.
		cfg.Run.Target = filepath.Join(root, "targets", "quicecho")
	}
	out, err := sweepOut(cfg)
	if err != nil {
		return nil, err
	}
	sw := &sweep{cfg: cfg, logf: logf, out: out, floor: filepath.Join(root, "targets", "udpfloor"),
		res: &SweepResult{SweepResult: schema.SweepResult{Schema: SweepSchema, Target: cfg.Run.Target, Rounds: cfg.Rounds}, Dir: out}}
	for _, size := range cfg.Sizes {
		row, err := sw.row(ctx, size)
		if err != nil {
			return nil, err
		}
		sw.res.Rows = append(sw.res.Rows, row)
	}
	res := sw.res
	res.Judged = len(res.Reasons) == 0
	var js, md bytes.Buffer
	if err := report.JSON(&js, res); err != nil {
		return nil, err
	}
	report.Sweep(&md, &res.SweepResult)
	if err := writeFiles(out, map[string][]byte{"sweep.json": js.Bytes(), "report.md": md.Bytes()}); err != nil {
		return nil, err
	}
	if !res.Judged {
		return res, fmt.Errorf("%w: %s", ErrNotJudged, strings.Join(res.Reasons, "; "))
	}
	return res, nil
}

// sweepOut makes the sweep's results folder, never an existing one.
func sweepOut(cfg SweepConfig) (string, error) {
	out := cfg.Out
	if out == "" {
		out = filepath.Join("results", "bulk_"+filepath.Base(cfg.Run.Target))
		if err := os.MkdirAll("results", 0o755); err != nil {
			return "", err
		}
	}
	out, err := makeOutDir(out, "", "")
	if err != nil {
		return "", err
	}
	return out, os.Mkdir(filepath.Join(out, "runs"), 0o700)
}

// sweep is a bulk sweep on its way.
type sweep struct {
	cfg   SweepConfig
	logf  func(string, ...any)
	out   string
	floor string // targets/udpfloor
	res   *SweepResult
}

// row measures one transfer size: push, echo and the floor, interleaved so
// that drift on the machine falls on all three; the first round is dropped.
func (sw *sweep) row(ctx context.Context, size int64) (schema.SweepRow, error) {
	row := schema.SweepRow{Size: size}
	pkt := 0
	target := sw.cfg.Run.Target
	for r := 1; r <= sw.cfg.Rounds; r++ {
		p, err := sw.one(ctx, bulkRun{target, "push", size, 0, r})
		if err != nil {
			return row, err
		}
		if pkt == 0 || int(p.Transfer.LargestDatagram) > pkt {
			pkt = int(p.Transfer.LargestDatagram)
		}
		e, err := sw.one(ctx, bulkRun{target, "echo", size, 0, r})
		if err != nil {
			return row, err
		}
		f, err := sw.one(ctx, bulkRun{sw.floor, "push", size, pkt, r})
		if err != nil {
			return row, err
		}
		if r == 1 {
			continue
		}
		addRound(&row.Push, p)
		addRound(&row.Echo, e)
		addRound(&row.Floor, f)
	}
	if row.Floor.CPUUSPerMB > 0 {
		row.PushRatio = round(row.Push.CPUUSPerMB/row.Floor.CPUUSPerMB, 3)
		row.EchoRatio = round(row.Echo.CPUUSPerMB/row.Floor.CPUUSPerMB, 3)
	}
	return row, nil
}

// bulkRun is one run of a sweep: a target in a mode, a transfer size, the
// floor's datagram size (0: the target's own) and the round.
type bulkRun struct {
	target, mode string
	size         int64
	pkt, round   int
}

// one runs the timing window of one bulkRun.
func (sw *sweep) one(ctx context.Context, b bulkRun) (*schema.Summary, error) {
	rc := sw.cfg.Run
	rc.Target, rc.Size, rc.Pkt = b.target, b.size, b.pkt
	rc.Args = append(append([]string(nil), sw.cfg.Run.Args...), "-mode="+b.mode)
	rc.Copies, rc.Allocs, rc.OffCPU, rc.Floor = "off", "heapprofile", false, false
	name := filepath.Base(b.target)
	what := fmt.Sprintf("%s %s %s round %d", report.SizeName(b.size), name, b.mode, b.round)
	rc.Out = filepath.Join(sw.out, "runs", fmt.Sprintf("%s-%s-%s-%d", report.SizeName(b.size), name, b.mode, b.round))
	sw.logf("%s, %s %s, round %d/%d", report.SizeName(b.size), name, b.mode, b.round, sw.cfg.Rounds)
	r, err := run(ctx, rc, internals{timingOnly: true}, nil)
	if err != nil && !errors.Is(err, ErrNotJudged) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if r.Summary.Transfer == nil || r.Summary.PerRequest.CPUUS == nil {
		return nil, fmt.Errorf("%s: no transfer figures (is %s a bulk target?)", what, b.target)
	}
	if b.round > 1 && r.Summary.Verdict != VerdictServerBound {
		sw.res.Reasons = append(sw.res.Reasons, fmt.Sprintf("%s not judged: %s", what, strings.Join(r.Summary.Reasons, "; ")))
	}
	return r.Summary, nil
}

// addRound keeps a round: the cell is the round with the least CPU per MB.
func addRound(c *schema.SweepCell, s *schema.Summary) {
	v := s.Transfer.CPUUSPerMB
	c.Rounds = append(c.Rounds, v)
	if len(c.Rounds) == 1 || v < c.CPUUSPerMB {
		c.CPUUSPerMB = v
		c.DatagramsPerRequest = *s.DatagramsPerRequest
		c.SyscallsPerDatagram = s.PerDatagram.Syscalls
	}
}

// parseSizes reads "1K,64K,1M,2M": bytes, or K and M (1024, 1048576).
func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := int64(1)
		switch {
		case strings.HasSuffix(f, "K"), strings.HasSuffix(f, "k"):
			mult, f = 1<<10, f[:len(f)-1]
		case strings.HasSuffix(f, "M"), strings.HasSuffix(f, "m"):
			mult, f = 1<<20, f[:len(f)-1]
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 || n > math.MaxInt64/mult || n*mult > 1<<30 {
			return nil, fmt.Errorf("size %q: want bytes, or a count of K or M, up to 1 GiB", f)
		}
		out = append(out, n*mult)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
