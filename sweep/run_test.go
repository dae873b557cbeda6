package sweep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/scenario"
)

// TestRunner: each run runs its point's scenario, one variant, in its
// own folder, at most Parallel at once; a run that finished is marked
// (sweep-run.json) and not run again, a failed one is not marked, and the
// expectations not met are named by run.
func TestRunner(t *testing.T) {
	p := parse(t, gridYAML)
	runs, err := Runs(p, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openDir(t, dir)
	var mu sync.Mutex
	got := map[string]string{} // run ID -> what its plan ran
	var now, most atomic.Int32
	run := func(ctx context.Context, one *scenario.Plan, d *outdir.Dir, log *zap.Logger) ([]string, error) {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond) // long beside a run's At, so that runs overlap
		if filepath.Base(d.Path()) == runs[0].ID {
			// The first run ends once another runs beside it.
			for start := time.Now(); most.Load() < 2 && time.Since(start) < 10*time.Second; {
				time.Sleep(time.Millisecond)
			}
		}
		if len(one.Runs) != 1 {
			t.Errorf("%s: %d runs, want one", d.Path(), len(one.Runs))
		}
		s := one.Runs[0]
		mu.Lock()
		got[filepath.Base(d.Path())] = fmt.Sprintf("%s %v %v %d", s.Variant, s.Uplink.Delay.Time, s.Uplink.Loss.P, s.Seed)
		mu.Unlock()
		switch filepath.Base(d.Path()) {
		case runs[3].ID:
			return nil, errors.New("it broke")
		case runs[5].ID:
			return []string{"flows.a.loss_ratio < 1%"}, nil
		}
		return nil, nil
	}
	var ended []int
	rn := &Runner{Plan: p, Out: out, Log: zap.NewNop(), Parallel: 3, RunOne: run,
		Ended: func(n int, r Run, _ time.Duration, err error) { ended = append(ended, n) }}
	res := rn.RunAll(context.Background(), runs)
	if res.Finished != 15 || !slices.Equal(res.Failed, []string{runs[3].ID + ": it broke"}) ||
		!slices.Equal(res.Unmet, []string{runs[5].ID + ": flows.a.loss_ratio < 1%"}) {
		t.Errorf("outcome %+v", res)
	}
	if most.Load() != 2 && most.Load() != 3 {
		t.Errorf("%d runs at once, want 2 or 3 (Parallel 3)", most.Load())
	}
	if !slices.Equal(ended, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}) {
		t.Errorf("Ended told %v", ended)
	}
	if w := "far 50ms 0.02 2"; got[runs[15].ID] != w {
		t.Errorf("run 15 ran %q, want %q", got[runs[15].ID], w)
	}
	if w := "near 5ms 0.01 1"; got[runs[0].ID] != w {
		t.Errorf("run 0 ran %q, want %q", got[runs[0].ID], w)
	}
	if todo := Todo(out, runs); len(todo) != 1 || todo[0].ID != runs[3].ID {
		t.Errorf("todo after the runs: %+v, want the failed run only", todo)
	}
	b, err := os.ReadFile(filepath.Join(dir, runs[15].ID, RunFile))
	if want := `"id": "` + runs[15].ID + `"`; err != nil || !strings.Contains(string(b), want) {
		t.Errorf("%s: %s %v, want %s", RunFile, b, err, want)
	}
}

// TestRunnerInterrupted: a run that ctx interrupts is neither done nor
// failed, and no run starts once ctx ended.
func TestRunnerInterrupted(t *testing.T) {
	p := parse(t, gridYAML)
	runs, err := Runs(p, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	out := openDir(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int32
	run := func(ctx context.Context, one *scenario.Plan, d *outdir.Dir, log *zap.Logger) ([]string, error) {
		if started.Add(1) == 3 {
			cancel()
			return nil, ctx.Err()
		}
		return nil, nil
	}
	told := 0
	rn := &Runner{Plan: p, Out: out, Log: zap.NewNop(), Parallel: 1, RunOne: run,
		Ended: func(int, Run, time.Duration, error) { told++ }}
	res := rn.RunAll(ctx, runs)
	if res.Finished != 2 || len(res.Failed) != 0 || started.Load() != 3 || told != 2 {
		t.Errorf("outcome %+v, %d started, %d told; want 2 finished of 3 started", res, started.Load(), told)
	}
	if todo := Todo(out, runs); len(todo) != 14 {
		t.Errorf("%d runs to do, want 14", len(todo))
	}
}
