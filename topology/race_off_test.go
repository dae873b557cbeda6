//go:build !race

package topology_test

const raceEnabled = false
