package schema

// SweepSchema is the schema name of sweep.json.
const SweepSchema = "perfspy.bulk-sweep/v1"

// SweepCell is one mode at one size: the minimum over the kept rounds.
type SweepCell struct {
	CPUUSPerMB          float64   `json:"cpu_us_per_mb"`
	DatagramsPerRequest float64   `json:"datagrams_per_request"`
	SyscallsPerDatagram float64   `json:"syscalls_per_datagram"`
	Rounds              []float64 `json:"rounds_cpu_us_per_mb"` // the kept rounds
}

// SweepRow is one size.
type SweepRow struct {
	Size      int64     `json:"size"`
	Push      SweepCell `json:"push"`
	Echo      SweepCell `json:"echo"`
	Floor     SweepCell `json:"floor"` // targets/udpfloor, push, datagrams of push's largest size
	PushRatio float64   `json:"push_floor_ratio"`
	EchoRatio float64   `json:"echo_floor_ratio"`
}

// SweepResult is probe bulk's sweep.json: for each transfer size, push,
// echo and the UDP floor, each the least CPU per MB of its rounds.
type SweepResult struct {
	Schema  string     `json:"schema"`
	Target  string     `json:"target"`
	Rounds  int        `json:"rounds"`
	Rows    []SweepRow `json:"rows"`
	Judged  bool       `json:"judged"`
	Reasons []string   `json:"reasons,omitempty"`
}
