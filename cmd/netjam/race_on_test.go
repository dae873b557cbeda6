//go:build race

package main

// raceEnabled: the race detector reorders goroutines far more than a
// loaded machine does; see skipUnderRace.
const raceEnabled = true
