package schema

// StepsSchema is the schema name of steps.json.
const StepsSchema = "perfspy.rate-steps/v1"

// StepsResult is probe run -rate-steps's steps.json: one open-loop run per
// rate, and the knee: the first rate whose p99 (from the intended send)
// is more than twice the first step's, or that the driver could not hold.
type StepsResult struct {
	Schema   string     `json:"schema"`
	Target   string     `json:"target"`
	Arrivals string     `json:"arrivals"` // constant or poisson
	Steps    []RateStep `json:"steps"`
	Knee     float64    `json:"knee,omitempty"` // 0: none within the steps
	KneeWhy  string     `json:"knee_why,omitempty"`
	// Stopped says why the steps stopped before the last rate (an
	// interrupt, a step that failed): Steps holds those that finished.
	Stopped string `json:"stopped,omitempty"`
}

// RateStep is one rate's run: its verdict, latency and per-request
// figures, the same as its own summary.json's (in Dir).
type RateStep struct {
	Rate         float64            `json:"rate"`
	Dir          string             `json:"dir"` // its results folder, relative to steps.json's
	Verdict      string             `json:"verdict"`
	Reasons      []string           `json:"reasons,omitempty"`
	RPS          float64            `json:"rps"`
	LatencyUS    map[string]int64   `json:"latency_us"`
	LatencyRawUS map[string]int64   `json:"latency_raw_us"`
	LateSends    int64              `json:"late_sends"`
	DroppedSends int64              `json:"dropped_sends"`
	CPUUS        *float64           `json:"cpu_us"`
	Allocs       *float64           `json:"allocs"`
	AllocBytes   *float64           `json:"alloc_bytes"`
	OffCPUUS     map[string]float64 `json:"offcpu_us,omitempty"`
}
