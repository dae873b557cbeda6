//go:build race

package hostnet

// raceEnabled: under the race detector sync.Pool drops a share of what is
// put back on purpose, so tests that count allocations of pooled state
// cannot hold and skip themselves.
const raceEnabled = true
