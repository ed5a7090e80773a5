package schema

import (
	"fmt"
	"strings"
)

// OffCPUReasons are the reasons a request's goroutine waits, in the
// order summary.json's offcpu_us and the reports list them.
var OffCPUReasons = []string{"net", "sync", "syscall", "sched", "gc", "sleep", "other", "net_idle"}

// RequestParts are the parts of a request's time (request_us, the bills'
// time_us): on CPU, then the off-CPU reasons.
var RequestParts = append([]string{"cpu"}, OffCPUReasons...)

// CopySite is the copies of one (user frame, direct caller, kind) triple,
// calls and bytes by size bucket (<64, <1K, <16K, >=16K).
type CopySite struct {
	User   string // first frame outside the runtime; the direct caller when all frames are runtime
	Direct string // the function that called memmove or memclr
	Kind   string
	Calls  [4]int64
	Bytes  [4]int64
}

// TotalCalls sums the buckets' calls.
func (s *CopySite) TotalCalls() int64 { return s.Calls[0] + s.Calls[1] + s.Calls[2] + s.Calls[3] }

// TotalBytes sums the buckets' bytes.
func (s *CopySite) TotalBytes() int64 { return s.Bytes[0] + s.Bytes[1] + s.Bytes[2] + s.Bytes[3] }

// CPUList writes cpus (ServerCPUs, DriverCPUs) as the kernel writes
// Cpus_allowed_list: 0-2,4.
func CPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
