//go:build !linux

package wifi

import "time"

func preciseThread() func()        { return func() {} }
func preciseSleep(d time.Duration) { time.Sleep(d) }
