package probe

import (
	"github.com/perfspy/perfspy/schema"
)

// SummarySchema is the schema name of summary.json.
const SummarySchema = schema.SummarySchema

// Verdicts.
const (
	VerdictServerBound = schema.VerdictServerBound
	VerdictRateHeld    = schema.VerdictRateHeld
	VerdictNotJudged   = schema.VerdictNotJudged
)

// judgedVerdict reports whether a run's verdict judged its windows: the
// server was the bottleneck, or the driver held the rate asked for.
func judgedVerdict(v string) bool { return v == VerdictServerBound || v == VerdictRateHeld }

func f64(v float64) *float64 { return &v }
