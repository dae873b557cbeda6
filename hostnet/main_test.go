package hostnet

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: a namespace's
// thread and a device's reader end with what made them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitFor polls cond until it holds, failing t after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
