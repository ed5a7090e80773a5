package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/perfspy/perfspy/schema"
)

// Sweep writes probe bulk's report.md: per size, the least CPU per MB of
// push, echo and the UDP floor, and their ratios.
func Sweep(w io.Writer, r *schema.SweepResult) {
	fmt.Fprintf(w, "# probe bulk: %s\n\n", r.Target)
	fmt.Fprintf(w, "Server CPU µs per MB of transfer, the least of %d rounds (the first of %d dropped); a fresh target and connection for each round. The floor is targets/udpfloor (push, plain UDP, one syscall per datagram) with the same transfers.", r.Rounds-1, r.Rounds)
	if !r.Judged {
		fmt.Fprintf(w, " **Not judged**: %s.", strings.Join(r.Reasons, "; "))
	}
	fmt.Fprint(w, "\n\n| size | push min | echo min | floor | push/floor | echo/floor | push datagrams | echo datagrams | floor datagrams | push syscalls/datagram | floor syscalls/datagram |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.1f | %.1f | %.1f | %.3f | %.3f |\n", SizeName(row.Size),
			row.Push.CPUUSPerMB, row.Echo.CPUUSPerMB, row.Floor.CPUUSPerMB, row.PushRatio, row.EchoRatio,
			row.Push.DatagramsPerRequest, row.Echo.DatagramsPerRequest, row.Floor.DatagramsPerRequest,
			row.Push.SyscallsPerDatagram, row.Floor.SyscallsPerDatagram)
	}
}

// SizeName writes a size as 1K, 64K, 1M or in bytes.
func SizeName(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}
