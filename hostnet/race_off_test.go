//go:build !race

package hostnet

const raceEnabled = false
