package interrupt

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestWatchInterrupts: the first signal ends the context, the second
// exits with 128+its number and names what was not written; one that
// comes with the first (timeout(1) sends its signal twice at once) is
// the first again.
func TestWatchInterrupts(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		sigs := make(chan os.Signal, 2)
		var stderr bytes.Buffer
		exited := make(chan int, 1)
		out := NewOutputs("/tmp/out", "summary.json", "the plots", "report.html")
		ctx, stop := watchInterrupts(context.Background(), sigs, &stderr, out, func(code int) { exited <- code }, func() {})
		sigs <- c.sig
		sigs <- c.sig // the same signal again at once: not a second one
		<-ctx.Done()
		select {
		case code := <-exited:
			t.Fatalf("%v: exit %d at a signal that came with the first", c.sig, code)
		case <-time.After(sameSignal / 2):
		}
		time.Sleep(sameSignal)
		out.Written("summary.json")
		sigs <- c.sig
		select {
		case code := <-exited:
			if want := "netjam: " + c.sig.String() + " again: exiting at once; not written to /tmp/out: the plots, report.html\n"; code != c.code || stderr.String() != want {
				t.Errorf("%v: exit %d, %q; want %d, %q", c.sig, code, stderr.String(), c.code, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: no exit after the second signal", c.sig)
		}
		stop()
	}
	// Stopped, the watch lets go: a stop without signals ends its goroutine.
	_, stop := watchInterrupts(context.Background(), make(chan os.Signal), &bytes.Buffer{}, NewOutputs("x"), func(int) { t.Error("exit") }, func() {})
	stop()
	stop()
}

// TestExitOnSignal: once a shell's command has ended, one signal ends
// netjam at once.
func TestExitOnSignal(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	stop := ExitOnSignal(sigs, &stderr, NewOutputs("/tmp/out", "summary.json"), func(code int) { exited <- code })
	sigs <- syscall.SIGINT
	select {
	case code := <-exited:
		if want := "netjam: interrupt: exiting at once; not written to /tmp/out: summary.json\n"; code != 130 || stderr.String() != want {
			t.Errorf("exit %d, %q; want 130, %q", code, stderr.String(), want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the signal")
	}
	stop()
	stop = ExitOnSignal(make(chan os.Signal), &stderr, NewOutputs("x"), func(int) { t.Error("exit") })
	stop()
}
