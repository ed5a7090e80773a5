//go:build !race

package load

// raceEnabled: built with -race (race_on.go).
const raceEnabled = false
