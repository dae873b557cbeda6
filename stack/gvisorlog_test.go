package stack

import (
	"testing"

	glog "github.com/netjam/netjam/third_party/gvisor/_pkg/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestRouteGVisorLog: gVisor's log lines, at its info and warning levels,
// arrive in the zap logger at debug level, and nowhere at info.
func TestRouteGVisorLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	RouteGVisorLog(zap.New(core))
	defer RouteGVisorLog(nil)
	glog.Infof("Martian packet dropped with loopback destination address %d", 1)
	glog.Warningf("something %s", "odd")
	got := logs.AllUntimed()
	if len(got) != 2 {
		t.Fatalf("got %d entries, want 2: %v", len(got), got)
	}
	for i, want := range []string{"Martian packet dropped with loopback destination address 1", "something odd"} {
		if e := got[i]; e.Message != want || e.Level != zapcore.DebugLevel || e.LoggerName != "gvisor" {
			t.Errorf("entry %d: %q at %v from %q, want %q at debug from gvisor", i, e.Message, e.Level, e.LoggerName, want)
		}
	}
	info, infoLogs := observer.New(zapcore.InfoLevel)
	RouteGVisorLog(zap.New(info))
	glog.Infof("not at info")
	if n := infoLogs.Len(); n != 0 {
		t.Errorf("%d gVisor lines at info level", n)
	}
}
