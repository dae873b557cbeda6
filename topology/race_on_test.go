//go:build race

package topology_test

// raceEnabled: under the race detector sync.Pool drops a share of what is
// put back on purpose, so tests that count allocations of pooled packets
// cannot hold and skip themselves.
const raceEnabled = true
