package probe

import (
	"strings"
	"testing"

	"github.com/perfspy/perfspy/internal/proc"
	"github.com/perfspy/perfspy/schema"
)

// TestPaceReason: a server that did not use its cores was paced by a busy
// driver, or waited with a driver that was not busy either (a sleeping
// handler): the reason says which, with both sides' figures.
func TestPaceReason(t *testing.T) {
	o := &runOutput{ses: &session{plan: proc.CPUPlan{Load: []int{1}}, coresHad: 1},
		s: &schema.Summary{ServerCores: 0.29, PerRequest: schema.PerRequest{CPUUS: f64(108.47)}, Driver: &schema.DriverSummary{Name: "nethttp", CPUUS: 70.38, CoresUsed: 0.19}}}
	for _, tc := range []struct {
		driverCores float64
		want        string
	}{
		{0.19, "the target used 0.29 of its 1 cores (< 90%), and the load driver was not busy either (driver nethttp 70.38 µs/req on 0.19 cores, server 108.47 µs/req)"},
		{0.97, "the target used 0.29 of its 1 cores (< 90%): the load driver, not the server, set the pace (driver nethttp 70.38 µs/req on 0.97 cores, server 108.47 µs/req)"},
	} {
		o.s.Driver.CoresUsed = tc.driverCores
		if got := o.paceReason(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("driver on %.2f cores: %q, want %q...", tc.driverCores, got, tc.want)
		}
	}
}
