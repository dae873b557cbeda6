package emulator

// One run of a plan, through its phases: build, start, wait, stop,
// close (Run in emulator.go runs a plan's runs).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

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
