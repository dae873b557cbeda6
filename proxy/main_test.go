package proxy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the tests leave no goroutine behind: every
// proxy's listener, connections and paths end with Server.Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}
