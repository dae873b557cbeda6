//go:build !race

package impair

const raceEnabled = false
