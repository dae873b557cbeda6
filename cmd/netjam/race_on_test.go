//go:build race

package main

// raceEnabled: the race detector slows the virtual clock's idleness
// checks most of all; see TestVirtualDocSamples.
const raceEnabled = true
