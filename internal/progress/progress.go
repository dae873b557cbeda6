// Package progress shows a person at a terminal how far netjam is: a
// run's bar with each flow's live throughput, and a sweep's bar with its
// estimated end (or, off a terminal, a line per run of the sweep).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/sweep"
)

// Terminal returns w as the terminal it is, if it is one: a bar is for
// a person at a terminal, never for a pipe, a file or CI's log.
func Terminal(w io.Writer) (*os.File, bool) {
	f, ok := w.(*os.File)
	return f, ok && term.IsTerminal(int(f.Fd()))
}

// Run shows a run's elapsed and total time and the live throughput of
// each flow on a terminal. It implements emulator.Progress.
type Run struct {
	w io.Writer

	bar  *progressbar.ProgressBar
	stop chan struct{}
	wg   sync.WaitGroup
}

// refresh is how often the bar is redrawn: often enough to look live,
// rarely enough to cost nothing.
const refresh = 250 * time.Millisecond

// NewRun shows runs' progress on w.
func NewRun(w io.Writer) *Run { return &Run{w: w} }

// Begin starts the bar of the run name, of duration total, with fls's
// throughput.
func (p *Run) Begin(name string, total time.Duration, fls []flows.Flow) {
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

// End shows the bar at its end and stops it.
func (p *Run) End() {
	close(p.stop)
	p.wg.Wait()
	p.bar.Finish()
}

// Sweep shows a sweep's progress over n runs on the terminal f: a bar
// with its estimated end. ended is the sweep's Runner.Ended; finish ends
// the bar.
func Sweep(f *os.File, n int) (ended func(int, sweep.Run, time.Duration, error), finish func()) {
	bar := progressbar.NewOptions(n, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("sweep"),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetWidth(30))
	return func(int, sweep.Run, time.Duration, error) { bar.Add(1) }, func() { bar.Finish() }
}

// SweepLines shows a sweep's progress over n runs off a terminal: a line
// on w per run that ended. It is the sweep's Runner.Ended.
func SweepLines(w io.Writer, n int) func(int, sweep.Run, time.Duration, error) {
	return func(ended int, r sweep.Run, took time.Duration, err error) {
		what := "done"
		if err != nil {
			what = "failed"
		}
		fmt.Fprintf(w, "[%d/%d] %s: %s in %.1f s\n", ended, n, r.ID, what, took.Seconds())
	}
}
