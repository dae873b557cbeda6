//go:build race

package main

// raceEnabled: the race detector slows gVisor and the virtual clock's
// idleness checks most of all; see skipUnderRace.
const raceEnabled = true
