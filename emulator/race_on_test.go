//go:build race

package emulator

// raceEnabled: the race detector reorders goroutines far more than a
// loaded machine does; see skipUnderRace.
const raceEnabled = true
