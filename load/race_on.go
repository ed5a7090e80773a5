//go:build race

package load

// raceEnabled: built with -race. The race detector sees a read or write
// system call made by package syscall as synchronizing (what one side
// wrote before it, the other sees after it); raw calls are not, so with
// -race the drivers keep net.Conn's own Read and Write (rawio_linux.go).
const raceEnabled = true
