package probe

import (
	"github.com/perfspy/perfspy/schema"
)

// SummarySchema is the schema name of summary.json.
const SummarySchema = schema.SummarySchema

// Verdicts.
const (
	VerdictServerBound = schema.VerdictServerBound
	VerdictNotJudged   = schema.VerdictNotJudged
)

func f64(v float64) *float64 { return &v }
