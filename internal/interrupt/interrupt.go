// Package interrupt is how netjam ends on a signal: the first SIGINT or
// SIGTERM stops a run, which then writes what it measured; a second, or
// one once a shell's command has ended, ends netjam at once, saying which
// of the run's outputs were not written and exiting as a shell reports a
// process a signal ended (128+the signal's number).
package interrupt

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Outputs tracks which of a run's outputs are still to be written, for
// the message of a second interrupt. Safe for concurrent use.
type Outputs struct {
	mu      sync.Mutex
	dir     string
	pending []string
}

// NewOutputs starts with every output of a run in dir pending.
func NewOutputs(dir string, names ...string) *Outputs {
	return &Outputs{dir: dir, pending: names}
}

// Written marks names as written.
func (o *Outputs) Written(names ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = removeAll(o.pending, names)
}

// String says what was not written to the folder, or that everything
// was.
func (o *Outputs) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) == 0 {
		return "everything was written to " + o.dir
	}
	return "not written to " + o.dir + ": " + strings.Join(o.pending, ", ")
}

// removeAll returns from without any of names, in a new slice.
func removeAll(from, names []string) []string {
	out := from[:0:0]
	for _, f := range from {
		keep := true
		for _, n := range names {
			keep = keep && f != n
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

// sameSignal is how soon after the first a signal is taken for the same
// one: timeout(1) sends its SIGTERM to the process and then to its
// process group, which holds the process, so that netjam got two at once
// and exited without its results; a person pressing Ctrl-C twice is
// slower.
const sameSignal = 100 * time.Millisecond

// Watch returns a context that ends at the first SIGINT or SIGTERM,
// so the run stops and writes what it measured. A second signal while
// that goes on (writing plots and the report can take seconds) ends the
// process at once, as a person pressing Ctrl-C twice means: it prints what
// was not written and exits with 128+the signal's number (130 for
// SIGINT), as a shell reports a process a signal ended. exit is os.Exit
// but in tests. stop ends the watch.
func Watch(parent context.Context, stderr io.Writer, out fmt.Stringer, exit func(int)) (ctx context.Context, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	return watchInterrupts(parent, sigs, stderr, out, exit, func() { signal.Stop(sigs) })
}

// watchInterrupts is Watch on a channel of signals.
func watchInterrupts(parent context.Context, sigs <-chan os.Signal, stderr io.Writer, out fmt.Stringer, exit func(int), unwatch func()) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := 0
		var first time.Time
		for {
			select {
			case sig := <-sigs:
				n++
				if n == 1 {
					first = time.Now()
					cancel()
					continue
				}
				if time.Since(first) < sameSignal {
					continue // the first again, as timeout(1) sends it
				}
				code := 128 + int(syscall.SIGINT)
				if s, ok := sig.(syscall.Signal); ok {
					code = 128 + int(s)
				}
				fmt.Fprintf(stderr, "netjam: %v again: exiting at once; %v\n", sig, out)
				exit(code)
				return
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			unwatch()
			close(done)
			wg.Wait()
			cancel()
		})
	}
}

// ExitOnSignal ends the process at once at the first signal from sigs,
// printing what out says was not written, with 128+the signal's number;
// stop ends the watch. A shell uses it once its command has ended.
func ExitOnSignal(sigs <-chan os.Signal, stderr io.Writer, out fmt.Stringer, exit func(int)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case sig := <-sigs:
			code := 128 + int(syscall.SIGINT)
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			fmt.Fprintf(stderr, "netjam: %v: exiting at once; %v\n", sig, out)
			exit(code)
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
