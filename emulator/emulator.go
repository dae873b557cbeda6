// Package emulator builds and runs a netjam scenario: it turns each run of
// a scenario.Plan into the two directions of the emulated path, starts
// them, stops them when the run is over, and collects what they measured
// into a Summary.
//
// Lifecycle of one run: build (validate and allocate everything; nothing
// runs yet), start (each direction's goroutine), wait (until the flows are
// done, the duration is over, or the context is cancelled), close (stop
// and join every goroutine, drop what is in flight), report. Close runs on
// every exit path, errors and cancellation included.
package emulator

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// Options are how a plan is run, as opposed to what it runs.
type Options struct {
	// Log receives the run's log lines; nil means no logging.
	Log *zap.Logger
	// Clock is the run's time source; nil means the real clock.
	Clock clock.Clock
	// Virtual runs every run on a clock.Virtual of its own instead of
	// Clock, as the scenario key clock: virtual does for its runs: as fast
	// as its work allows, not in its duration, and the same from the same
	// seed. Lab runs only (no tun section: TUN mode and kernel flows live
	// on the wall clock). Virtual runs go one at a time, since a virtual
	// clock waits for the whole process to be idle, and without Progress
	// (a run takes a moment).
	Virtual bool
	// Version is recorded in the summary.
	Version string
	// Progress, when not nil, is told when each run begins and ends
	// (with Parallel > 1 it is not used).
	Progress Progress
	// Parallel is how many runs (variants) may run at once; 0 or 1 runs
	// them one after another.
	Parallel int
	// OutDir is the run's output folder, where packet captures go (and
	// the time series' rows it no longer holds in memory); nil forbids
	// captures. It must stay open until Run returns.
	OutDir *outdir.Dir
	// Capture, when not empty, replaces the scenario's capture points
	// (the command line's --capture).
	Capture []string

	// Attached, when not nil, runs alongside each TUN mode run, once its
	// path is up and its flows are connected (netjam shell runs the
	// user's command in it). The run then lasts until Attached returns
	// and the flows are done, not for its duration; ctx ends when the run
	// is interrupted. Attached's error becomes the run's.
	Attached func(ctx context.Context) error

	// ConfineNode, when not nil, is applied to the command of a node
	// (scenario.Node.Run) before it starts: netjam shell under sudo runs
	// it as the invoking user, without capabilities. NodeOutput takes
	// its output, each line after the node's name ("server| ..."); nil:
	// os.Stderr.
	ConfineNode func(cmd *exec.Cmd) error
	NodeOutput  io.Writer

	// Live, when not nil, is handed each run once its flows started: a
	// control endpoint's handle on it (see Live), valid until it ends.
	Live func(*Live)

	// OpenNode, when not nil, starts each node rootless: the first
	// process of a user and network namespace of its own makes the
	// node's device and becomes its command (hostnet.StartRootlessCommand;
	// netjam shell without root sets it).
	OpenNode func(cfg hostnet.TUNConfig, c hostnet.RootlessCommand) (*hostnet.TUN, *hostnet.Rootless, error)

	// OpenTUN, when not nil, replaces hostnet.OpenTUN: it gets the device
	// TUN mode wants and returns it open and configured (netjam shell
	// without root has it made in a user namespace; see cmd/netjam).
	OpenTUN func(cfg hostnet.TUNConfig) (*hostnet.TUN, error)

	// openTUN opens TUN devices; nil means OpenTUN, or hostnet.OpenTUN.
	// Tests replace it with an in-memory device.
	openTUN openDevice
	// openNodeTUN and nodeNetns, when not nil, open a node's device and
	// make its namespace (tests: an in-memory device, no namespace).
	openNodeTUN openDevice
	nodeNetns   func() (*hostnet.Netns, error)
	// relayDial, when not nil, replaces the relay's dialer (tests).
	relayDial func(ctx context.Context, network, address string) (net.Conn, error)
}

// Progress shows a run's progress to a person.
type Progress interface {
	// Begin starts showing run name, which lasts at most total, with the
	// live throughput of its flows.
	Begin(name string, total time.Duration, fls []flows.Flow)
	// End stops showing the run.
	End()
}

// Path is the emulated path of one run: an uplink (client side to server
// side) and a downlink direction.
type Path struct {
	Up, Down *impair.Runner
	// Links are every link's directions, in the scenario's order; Up and
	// Down are the first's.
	Links []*LinkRun
}

// runners returns every direction of p: each link's uplink, then its
// downlink.
func (p *Path) runners() []*impair.Runner {
	var out []*impair.Runner
	for _, l := range p.Links {
		out = append(out, l.Up, l.Down)
	}
	return out
}

// LinkRun is one link's directions while a run runs.
type LinkRun struct {
	Name     string
	Up, Down *impair.Runner
}

// NewSeed returns a random seed for a scenario that names none; the run
// records it so that it can be repeated.
func NewSeed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:])
}

// Run runs every run of plan, one after another (or o.Parallel at a time),
// and returns their summary in plan order. A run that fails does not stop
// the others; Run returns all their errors joined. A cancelled ctx ends the
// current runs early (their partial results are kept) and skips the rest;
// Run then returns ctx's error along with the summary so far.
func Run(ctx context.Context, plan *scenario.Plan, o Options) (*summary.Summary, error) {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	sum := &summary.Summary{Scenario: plan.Name, Version: o.Version}
	if err := CheckExpectations(plan); err != nil {
		return sum, err
	}
	// Variants share one seed, so that what differs between them is
	// what the variants change, not the luck of the draw.
	seed := NewSeed()
	for _, s := range plan.Runs {
		if !s.SeedSet {
			s.Seed, s.SeedSet = seed, true
		}
	}
	// Real-time runs must not compete for the CPU, so they run one after
	// another unless asked otherwise; a progress bar shows one run only.
	parallel := max(o.Parallel, 1)
	if o.Virtual {
		if err := CheckVirtual(plan); err != nil {
			return sum, err
		}
	}
	virtual := func(s *scenario.Scenario) bool { return o.Virtual || s.Clock == scenario.ClockVirtual }
	if slices.ContainsFunc(plan.Runs, virtual) {
		parallel = 1
	}
	if parallel > 1 || slices.ContainsFunc(plan.Runs, virtual) {
		o.Progress = nil
	}
	results := make([]runResult, len(plan.Runs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
start:
	for i, s := range plan.Runs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break start
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o := o
			if virtual(s) {
				stop := startVirtual(&o, s)
				defer stop()
			}
			rs, series, err := runOne(ctx, s, o)
			results[i] = runResult{rs, series, err}
		}()
	}
	wg.Wait()
	return sum, addResults(ctx, sum, results)
}

// runResult is what one run of a plan gave.
type runResult struct {
	rs     *summary.RunSummary
	series *flows.Series
	err    error
}

// addResults adds the runs' results to sum and returns their errors
// joined, with ctx's. A failed run does not stop the others: each variant
// is reported, and the errors of all come back together.
func addResults(ctx context.Context, sum *summary.Summary, results []runResult) error {
	var errs []error
	for _, r := range results {
		if r.rs != nil {
			if r.err != nil && !errors.Is(r.err, context.Canceled) {
				r.rs.Error = r.err.Error()
			}
			sum.Runs = append(sum.Runs, *r.rs)
			if r.series != nil {
				sum.Series = append(sum.Series, r.series)
			}
		}
		if r.err != nil && !errors.Is(r.err, context.Canceled) {
			errs = append(errs, r.err)
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckVirtual tells whether every run of plan can run on the virtual
// clock (Options.Virtual): one error per run that cannot.
func CheckVirtual(plan *scenario.Plan) error {
	var errs []error
	for _, s := range plan.Runs {
		if s.TUN != nil {
			errs = append(errs, fmt.Errorf("run %s has a tun section: TUN mode and kernel flows run on the wall clock, the virtual clock runs labs of netstack hosts only", runName(s)))
		}
	}
	return errors.Join(errs...)
}

// startVirtual gives the run of s a virtual clock of its own and starts
// moving it; the function returned stops it and logs what the run cost
// in wall time.
func startVirtual(o *Options, s *scenario.Scenario) (stop func()) {
	v := clock.NewVirtual()
	o.Clock = v
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(done)
		v.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
		st := v.Stats()
		wall := time.Since(began)
		virtual := v.Now().Sub(clock.Epoch)
		o.Log.Info("virtual clock", zap.String("run", runName(s)), zap.Duration("virtual", virtual),
			zap.Duration("wall", wall), zap.Float64("speedup", virtual.Seconds()/wall.Seconds()),
			zap.Uint64("events", st.Events), zap.Uint64("idle_checks_by_stack_dump", st.StackChecks),
			zap.Uint64("waits_given_up", st.GaveUp))
	}
}

// drainGrace is how long a run waits past its duration for the packets
// still in flight, so that a run ends within a second of its duration
// whatever its queues hold: the senders stop at the duration, what
// arrives in the grace is counted (bytes_after_stop), and what the queues
// and the cell still hold then is dropped and counted as flushed, per
// queue. (A full 1000-packet queue at 10 Mbit/s holds 1.2 s; 50 saturated
// Wi-Fi stations' queues held 28 s.) The rest of the second is for
// closing the path and the hosts.
const drainGrace = 750 * time.Millisecond

// lateWarnMs is the p99 lateness of a direction's departures (ms) past
// which a run warns: Go's own timers' granularity (clock.Coarse), which
// the real-time scheduler's precise sleep exists to beat. An idle
// machine stays near 0.2 ms at p99; three busy loops beside a run on two
// cores took it to 5 to 8 ms (docs/accuracy.md).
const lateWarnMs = float64(clock.Coarse) / float64(time.Millisecond)

// lateWarnMin is how many departures a direction needs before its p99
// lateness is warned about: at least 10 past the p99, not one packet's
// (ten pings, one of them late, are not a busy machine's timing).
const lateWarnMin = 1000

func runName(s *scenario.Scenario) string {
	if s.Variant == "" {
		return s.Name
	}
	return s.Name + "/" + s.Variant
}
