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
	"strings"
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

// runOne runs one scenario: one variant of a plan, through the phases of
// a run. Its partial summary is returned along with an error, so that
// what was measured is reported.
func runOne(ctx context.Context, s *scenario.Scenario, o Options) (*summary.RunSummary, *flows.Series, error) {
	r, err := buildRun(s, o)
	if err != nil {
		if IsPrivilege(err) {
			// The other variants run; this one is reported as skipped.
			// Said once, at the end, by the caller; the table and
			// summary.json say which runs were skipped.
			r.log.Debug("run skipped: TUN mode needs privileges", zap.Error(err))
			return &summary.RunSummary{Variant: s.Variant, Seed: s.Seed, Skipped: privilegeReason(err)}, nil, fmt.Errorf("run %s: %w", runName(s), err)
		}
		return nil, nil, fmt.Errorf("run %s: %w", runName(s), err)
	}
	defer r.close()
	if err := r.start(ctx); err != nil {
		return nil, nil, fmt.Errorf("run %s: %w", runName(s), err)
	}
	r.wait(ctx)
	r.stop()
	rs := r.collect()
	if err := r.failures(ctx); err != nil {
		return rs, r.series, fmt.Errorf("run %s: %w", runName(s), err)
	}
	return rs, r.series, ctx.Err()
}

// run is one run of a scenario, in phases: buildRun (the lab, nothing
// running), start (the path, the flows connected and sending), wait (for
// the flows, the attached command, or the duration), stop (everything,
// in order), collect (the summary). close releases what is left on any
// exit path.
type run struct {
	s   *scenario.Scenario
	o   Options
	log *zap.Logger
	l   *lab

	fls   []flows.Flow
	conns []closer
	// begin is when the measurement started: once every flow is
	// connected (handshakes, and SYNs lost on a lossy path, are setup,
	// not part of a flow's time).
	begin   time.Time
	elapsed time.Duration
	tl      *timeline
	series  *flows.Series
	smp     *sampler
	lv      *Live
	cancel  context.CancelFunc // ends the flows (and the Live handle)
	flowsWG sync.WaitGroup
	errs    []error // each flow's
	// attachedErr is Options.Attached's error.
	attachedErr error
}

// buildRun builds the lab of s; nothing runs yet. On error the run has
// only its logger.
func buildRun(s *scenario.Scenario, o Options) (*run, error) {
	if len(o.Capture) > 0 {
		c := scenario.Capture{}
		if s.Capture != nil {
			c = *s.Capture
		}
		c.Points = o.Capture
		s.Capture = &c
	}
	r := &run{s: s, o: o, log: o.Log.With(zap.String("scenario", s.Name), zap.Uint64("seed", s.Seed))}
	if s.Variant != "" {
		r.log = r.log.With(zap.String("variant", s.Variant))
	}
	var err error
	r.l, err = newLab(s, o.Clock, r.log, o.OutDir, labHooks{open: o.deviceOpener(), dial: o.relayDial, openNode: o.openNodeTUN, nodeNetns: o.nodeNetns,
		rootlessNode: o.OpenNode, nodeOutput: o.NodeOutput})
	return r, err
}

// deviceOpener returns how the run opens a TUN device.
func (o Options) deviceOpener() openDevice {
	switch {
	case o.openTUN != nil:
		return o.openTUN
	case o.OpenTUN != nil:
		return func(cfg hostnet.TUNConfig) (hostnet.Device, error) {
			t, err := o.OpenTUN(cfg)
			if err != nil {
				return nil, err
			}
			return t, nil
		}
	}
	return openTUN
}

// start starts the path, connects every flow, schedules the timeline and
// starts the flows, the sampler and the Live handle.
func (r *run) start(ctx context.Context) error {
	s, o := r.s, r.o
	r.l.start(ctx)
	if err := r.l.startNodes(o); err != nil {
		return err
	}
	fields := []zap.Field{zap.Duration("duration", s.Duration), zap.Int("flows", len(s.Flows))}
	for i, lr := range r.l.path.Links {
		l := linkAt(s, i)
		fields = append(fields, zap.String(lr.Up.Chain().Name(), describe(l.Uplink)), zap.String(lr.Down.Chain().Name(), describe(l.Downlink)))
	}
	r.log.Info("run start", fields...)
	var err error
	r.fls, r.conns, err = r.l.connectFlows(ctx, s, o.Clock)
	if err != nil {
		return fmt.Errorf("connecting flows: %w", err)
	}
	r.begin = o.Clock.Now()
	if r.tl, err = scheduleTimeline(r.l.path, s, r.begin); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	r.tl.scheduleResets(o.Clock, s, r.fls)
	r.tl.schedulePartitions(o.Clock, s, r.l.partition)
	r.series = flows.NewSeries(s.Variant, r.begin)
	if o.OutDir != nil {
		r.series.SpillTo(o.OutDir)
	}
	// Flows stop sending by the run's duration (see lab.newFlow); what is
	// in flight then gets drainGrace to arrive before the run is cut.
	runCtx, cancel := clock.WithTimeout(ctx, o.Clock, s.Duration+drainGrace)
	r.cancel = cancel
	r.smp = newSampler(o.Clock, s.SampleInterval, r.series, r.fls, r.l.path, r.l.cell)
	r.smp.configured = len(s.Timeline) > 0 || o.Live != nil
	if o.Live != nil {
		r.lv = newLive(o.Clock, r.begin, r.l.path, r.fls, r.tl, cancel, s)
		r.lv.cell = r.l.cell
		r.lv.tun = r.l.tunSummary
		r.lv.partition = r.l.partition
		r.lv.own = func(ls []summary.LinkSummary) { r.l.addDeliveryCounts(r.l.s, ls) }
		r.smp.live = r.lv
	}
	r.smp.start(runCtx)
	if o.Progress != nil {
		o.Progress.Begin(runName(s), s.Duration, r.fls)
	}
	r.errs = make([]error, len(r.fls))
	for i, f := range r.fls {
		r.flowsWG.Add(1)
		go func() {
			defer r.flowsWG.Done()
			r.errs[i] = f.Run(runCtx)
		}()
	}
	if r.lv != nil {
		o.Live(r.lv)
	}
	return nil
}

// wait returns once the run is over: the attached command returned and
// the flows are done; in TUN mode without either, after the duration.
func (r *run) wait(ctx context.Context) {
	if r.l.tun != nil && r.o.Attached != nil {
		r.l.waitNodes()
		r.attachedErr = r.o.Attached(context.WithValue(ctx, etcKey{}, r.l.nodesEtc()))
	}
	r.flowsWG.Wait()
	if r.l.tun != nil && len(r.fls) == 0 && r.o.Attached == nil {
		// TUN mode without flows is for applications outside netjam:
		// the path stays up for the run's duration or until interrupted.
		t := r.o.Clock.NewTimer(r.s.Duration)
		select {
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// stop ends the flows, the Live handle (before the summary takes the
// timeline), the sampler and the progress, then closes the connections
// and the lab.
func (r *run) stop() {
	r.cancel()
	if r.lv != nil {
		r.lv.end()
	}
	r.smp.stop()
	r.elapsed = r.o.Clock.Now().Sub(r.begin)
	if r.o.Progress != nil {
		r.o.Progress.End()
	}
	r.close()
}

// close releases what the run holds; safe on any exit path, more than
// once.
func (r *run) close() {
	if r.tl != nil {
		r.tl.stop() // the timeline's connection resets
	}
	if r.cancel != nil {
		r.cancel()
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.l.close()
}

// collect returns the run's summary, and logs what netjam itself lost.
func (r *run) collect() *summary.RunSummary {
	s, l := r.s, r.l
	rs := &summary.RunSummary{
		Variant:   s.Variant,
		Seed:      s.Seed,
		DurationS: r.elapsed.Seconds(),
		Flows:     make([]flows.FlowSummary, len(r.fls)),
		Links:     l.path.summaries(s),
	}
	if l.cell != nil {
		ws := l.cell.Stats()
		rs.WiFi = &ws
	}
	rs.Timeline = r.tl.applied()
	rs.Captures = l.captureStats()
	rs.TUN = l.tunSummary()
	rs.Hosts = l.hostSummaries()
	l.addDeliveryCounts(l.s, rs.Links)
	rs.Paths = l.pathSummaries(l.s)
	for i, f := range r.fls {
		rs.Flows[i] = r.flowSummary(i, f)
	}
	rs.CouldNotKeepUp = r.warnOwnDrops(rs.Links)
	for _, f := range rs.Flows {
		if u := f.UDPSummary; u != nil && u.ReceiverDrops > 0 {
			rs.CouldNotKeepUp = append(rs.CouldNotKeepUp, summary.OwnLimit{Where: f.Name, What: "receiver_drops", Value: float64(u.ReceiverDrops),
				Message: fmt.Sprintf("flow %s: %d datagrams crossed the path and were dropped by the receiving socket, its buffer full (not counted as lost)", f.Name, u.ReceiverDrops)})
		}
	}
	rs.Fairness, rs.FairnessFlows = fairness(s.Flows, rs.Flows)
	r.log.Info("run end", zap.Duration("elapsed", r.elapsed),
		zap.Uint64("uplink_packets", rs.Links[0].PacketsOut), zap.Uint64("downlink_packets", rs.Links[1].PacketsOut),
		zap.Uint64("no_route", l.noRoute()), zap.Uint64("too_large", l.tooLarge()))
	for _, l := range rs.Links {
		for _, st := range l.Stages {
			r.log.Debug("stage", zap.String("link", l.Name), zap.String("stage", st.Name),
				zap.Uint64("packets_in", st.InPackets), zap.Uint64("packets_out", st.OutPackets), zap.Any("drops", st.Drops))
		}
	}
	rs.Expectations = checkExpectations(rs, s.Expect)
	return rs
}

// flowSummary returns the summary of flow number i, warning when it did
// not finish.
func (r *run) flowSummary(i int, f flows.Flow) flows.FlowSummary {
	fs := f.Summary()
	fs.Stack = r.s.Flows[i].Stack
	if len(r.s.Links) > 1 || len(r.s.Paths) > 1 || len(r.s.Links) == 1 && r.s.Links[0].Name != scenario.DefaultLink {
		fs.Path = r.s.FlowPath(r.s.Flows[i]).Name
	}
	if fs.Type == flows.TypeTCP {
		fs.CC = r.s.Flows[i].CC
		if fs.CC == "" {
			fs.CC = "cubic" // the host default, see hostcfg.TCPOptions
		}
	}
	if u := fs.UDPSummary; u != nil && u.ReceiverDrops > 0 {
		r.log.Warn("netjam could not keep up: datagrams that crossed the path were dropped by the flow's receiving socket, its buffer full (not counted as lost)",
			zap.String("flow", fs.Name), zap.Uint64("receiver_drops", u.ReceiverDrops))
	}
	if t := fs.TCPSummary; t != nil && !t.Completed && t.Size > 0 && t.ResetAtS == 0 {
		r.log.Warn("flow "+fs.Name+" did not finish when the run ended: "+strings.TrimPrefix(flows.Unfinished(t.BytesReceived, t.Size), "unfinished: ")+" received",
			zap.String("flow", fs.Name), zap.Uint64("bytes_received", t.BytesReceived), zap.Uint64("size", t.Size))
	}
	return fs
}

// warnOwnDrops warns of what netjam itself, not the configured path, did
// to the packets: drops and waits inside netjam, and departures later
// than lateWarnMs at p99 (of at least lateWarnMin); and returns each, for
// the run's summary and the report's banner.
func (r *run) warnOwnDrops(links []summary.LinkSummary) []summary.OwnLimit {
	var out []summary.OwnLimit
	for _, l := range links {
		if l.DeliveryDrops > 0 {
			r.log.Warn("netjam could not keep up: packets dropped inside netjam, not by the path (a receiving host was stuck)",
				zap.String("link", l.Name), zap.Uint64("delivery_drops", l.DeliveryDrops))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "delivery_drops", Value: float64(l.DeliveryDrops),
				Message: fmt.Sprintf("%s: %d packets dropped inside netjam, not by the path (a receiving host was stuck)", l.Name, l.DeliveryDrops)})
		}
		if n := l.Drops[impair.DropInput.String()]; n > 0 {
			r.log.Warn("netjam could not keep up: packets dropped at a direction's input, not by the configured path",
				zap.String("link", l.Name), zap.Uint64("input_drops", n))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "input_drops", Value: float64(n),
				Message: fmt.Sprintf("%s: %d packets dropped at the direction's input, not by the configured path", l.Name, n)})
		}
		if l.DeliveryWaits > 0 {
			r.log.Warn("netjam could not keep up: a direction waited for a receiver that fell behind (nothing lost): its packets left late, see lateness_ms",
				zap.String("link", l.Name), zap.Uint64("delivery_waits", l.DeliveryWaits))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "delivery_waits", Value: float64(l.DeliveryWaits),
				Message: fmt.Sprintf("%s: waited %d times for a receiver that fell behind (nothing lost): its packets left late", l.Name, l.DeliveryWaits)})
		}
		if l.InputWaits > 0 {
			r.log.Warn("netjam could not keep up: TCP senders were held back at a direction's full input (nothing lost): the machine, not the configured path, limited them",
				zap.String("link", l.Name), zap.Uint64("input_waits", l.InputWaits))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "input_waits", Value: float64(l.InputWaits),
				Message: fmt.Sprintf("%s: TCP senders held back %d times at the direction's full input (nothing lost): the machine, not the configured path, limited them", l.Name, l.InputWaits)})
		}
		if l.LatenessMs.Count >= lateWarnMin && l.LatenessMs.P99 > lateWarnMs {
			r.log.Warn("netjam could not keep up: packets left the direction late against their exact departure times (the machine was busy): its timing was that much coarser than configured, see lateness_ms",
				zap.String("link", l.Name), zap.Float64("lateness_p99_ms", l.LatenessMs.P99), zap.Float64("lateness_max_ms", l.LatenessMs.Max))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "late", Value: l.LatenessMs.P99,
				Message: fmt.Sprintf("%s: packets left %.3g ms late at p99 (%.3g ms at most) against their exact departure times: the machine was busy, and the path's timing that much coarser than configured",
					l.Name, l.LatenessMs.P99, l.LatenessMs.Max)})
		}
	}
	return out
}

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

// failures returns what went wrong in the run. A flow cut short by the
// run's duration is not a failure; anything else a flow reports (a
// corrupted byte, a broken connection) is, and so is the attached
// command's error.
func (r *run) failures(ctx context.Context) error {
	var failed []error
	for i, err := range r.errs {
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !(errors.Is(err, context.Canceled) && ctx.Err() == nil) {
			failed = append(failed, fmt.Errorf("flow %s: %w", r.fls[i].Name(), err))
		}
	}
	if r.attachedErr != nil {
		failed = append(failed, r.attachedErr)
	}
	if t := r.l.tun; t != nil {
		if err := t.nodesErr(); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

func runName(s *scenario.Scenario) string {
	if s.Variant == "" {
		return s.Name
	}
	return s.Name + "/" + s.Variant
}

// fairness is Jain's index of the flows that compete for one bottleneck,
// and their names (see RunSummary.Fairness): the TCP flows of the uplink,
// else of the downlink, when there are at least two.
func fairness(specs []scenario.Flow, sums []flows.FlowSummary) (*float64, []string) {
	for _, dir := range []string{"up", "down"} {
		var names []string
		var tputs []float64
		for i, f := range specs {
			if f.Type == flows.TypeTCP && f.Direction == dir {
				names = append(names, sums[i].Name)
				tputs = append(tputs, sums[i].ThroughputBps)
			}
		}
		if len(tputs) > 1 {
			j := flows.Jain(tputs)
			return &j, names
		}
	}
	return nil, nil
}
