//go:build !race

package emulator

const raceEnabled = false
