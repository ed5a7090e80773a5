package schema

// ABMetric is one metric's comparison.
type ABMetric struct {
	Before   float64 `json:"before"`
	After    float64 `json:"after"`
	Delta    float64 `json:"delta"`
	DeltaPct float64 `json:"delta_pct"`
	P        float64 `json:"p"`
	// JudgedAs is how the change was judged (metric.Judgement): exact,
	// bytes, timing or instructions.
	JudgedAs string `json:"judged_as"`
	Verdict  string `json:"verdict"`
	Why      string `json:"why,omitempty"`
}

// ABFunction is one function's change per request in one profile.
type ABFunction struct {
	Profile string  `json:"profile"`
	Key     string  `json:"key"`
	Before  float64 `json:"before"`
	After   float64 `json:"after"`
	Delta   float64 `json:"delta"`
	// Sample and Unit are what the rows count (copied_bytes, bytes).
	Sample string `json:"sample,omitempty"`
	Unit   string `json:"unit,omitempty"`
	// Scope is whose code the function is: runtime, std (the rest of the
	// standard library) or user.
	Scope string `json:"scope"`
}
