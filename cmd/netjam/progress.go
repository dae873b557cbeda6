package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/netjam/netjam/flows"
)

// progress shows a run's elapsed and total time and the live throughput
// of each flow on a terminal. It implements emulator.Progress.
type progress struct {
	w io.Writer

	bar  *progressbar.ProgressBar
	stop chan struct{}
	wg   sync.WaitGroup
}

// refresh is how often the bar is redrawn: often enough to look live,
// rarely enough to cost nothing.
const refresh = 250 * time.Millisecond

func (p *progress) Begin(name string, total time.Duration, fls []flows.Flow) {
	p.bar = progressbar.NewOptions64(int64(total/time.Millisecond),
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(name),
		progressbar.OptionSetWidth(24),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(refresh/2),
		// The finished bar stays, at 100% with the elapsed time: a
		// cleared one could leave the last frame (one refresh short of
		// the end, 97%) on a terminal whose line it had wrapped.
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
	)
	p.stop = make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		start := time.Now()
		last := make([]flows.Sample, len(fls))
		t := time.NewTicker(refresh)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				var parts []string
				for i, f := range fls {
					s := f.Sample(now)
					if !last[i].Time.IsZero() {
						rate := float64(s.Bytes-last[i].Bytes) * 8 / now.Sub(last[i].Time).Seconds()
						parts = append(parts, fmt.Sprintf("%s %.1f Mbit/s", f.Name(), rate/1e6))
					}
					last[i] = s
				}
				p.bar.Describe(fmt.Sprintf("%s  %s  [%s / %s]", name, strings.Join(parts, ", "),
					time.Since(start).Round(time.Second), total))
				p.bar.Set64(int64(time.Since(start) / time.Millisecond))
			}
		}
	}()
}

func (p *progress) End() {
	close(p.stop)
	p.wg.Wait()
	p.bar.Finish()
}
