package stack

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	glog "github.com/netjam/netjam/third_party/gvisor/_pkg/log"
	"go.uber.org/zap"
)

// RouteGVisorLog sends gVisor's own log lines ("Martian packet dropped
// ...") to log, named "gvisor", at debug level whatever gVisor's level
// for them: they describe single packets from the path, which is hostile
// input, and gVisor would otherwise print them on the process's standard
// error, into the terminal of a shell's command. nil discards them.
//
// gVisor's logger is process-wide and read without synchronization, and
// some of its packages keep the logger they found when they were
// initialized (the martian packet logger of ipv4, for one), so the first
// call redirects that very logger's output once, and must come before any
// Host is made; later calls only swap the zap logger, atomically. The
// command calls it once its logger is built.
func RouteGVisorLog(log *zap.Logger) {
	if log == nil {
		log = zap.NewNop()
	}
	gvisorLog.log.Store(log.Named("gvisor").WithOptions(zap.AddCallerSkip(3)))
	gvisorLog.once.Do(func() { glog.Log().Emitter = &gvisorLog })
}

// gvisorLog is the emitter gVisor's logger is given: package-level
// because gVisor's logger is.
var gvisorLog zapEmitter

// zapEmitter is a gVisor log.Emitter writing to a zap logger.
type zapEmitter struct {
	once sync.Once
	log  atomic.Pointer[zap.Logger]
}

// Emit implements glog.Emitter.
func (e *zapEmitter) Emit(_ int, level glog.Level, _ time.Time, format string, v ...any) {
	l := e.log.Load()
	if l == nil || !l.Core().Enabled(zap.DebugLevel) {
		return
	}
	l.Debug(fmt.Sprintf(format, v...), zap.Stringer("gvisor_level", level))
}
