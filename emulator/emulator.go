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
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
)

// Options are how a plan is run, as opposed to what it runs.
type Options struct {
	// Log receives the run's log lines; nil means no logging.
	Log *zap.Logger
	// Clock is the run's time source; nil means the real clock.
	Clock clock.Clock
	// Version is recorded in the summary.
	Version string
}

// Path is the emulated path of one run: an uplink (client side to server
// side) and a downlink direction.
type Path struct {
	Up, Down *impair.Runner
}

// newPath builds both directions of s. deliverUp and deliverDown receive
// what leaves each direction.
func newPath(s *scenario.Scenario, clk clock.Clock, deliverUp, deliverDown func(time.Time, *impair.Packet)) (*Path, error) {
	upCfg, err := directionConfig("uplink", s.Seed, s.Uplink)
	if err != nil {
		return nil, err
	}
	downCfg, err := directionConfig("downlink", s.Seed, s.Downlink)
	if err != nil {
		return nil, err
	}
	up, err := impair.NewRunner(upCfg, clk, deliverUp)
	if err != nil {
		return nil, err
	}
	down, err := impair.NewRunner(downCfg, clk, deliverDown)
	if err != nil {
		return nil, err
	}
	return &Path{Up: up, Down: down}, nil
}

func (p *Path) start(ctx context.Context) {
	p.Up.Start(ctx)
	p.Down.Start(ctx)
}

// close stops both directions; safe to call more than once.
func (p *Path) close() {
	p.Up.Close()
	p.Down.Close()
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

// Run runs every run of plan, one after another, and returns their
// summary. A cancelled ctx ends the current run early (its partial results
// are kept) and skips the rest; Run then returns ctx's error along with
// the summary so far.
func Run(ctx context.Context, plan *scenario.Plan, o Options) (*Summary, error) {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	sum := &Summary{Scenario: plan.Name, Version: o.Version}
	// Variants share one seed, so that what differs between them is
	// what the variants change, not the luck of the draw.
	seed := NewSeed()
	for _, s := range plan.Runs {
		if !s.SeedSet {
			s.Seed, s.SeedSet = seed, true
		}
	}
	for _, s := range plan.Runs {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		rs, err := runOne(ctx, s, o)
		if rs != nil {
			sum.Runs = append(sum.Runs, *rs)
		}
		if err != nil {
			return sum, err
		}
	}
	return sum, ctx.Err()
}

// runOne runs one scenario: one variant of a plan.
func runOne(ctx context.Context, s *scenario.Scenario, o Options) (*RunSummary, error) {
	log := o.Log.With(zap.String("scenario", s.Name), zap.Uint64("seed", s.Seed))
	if s.Variant != "" {
		log = log.With(zap.String("variant", s.Variant))
	}
	release := func(_ time.Time, p *impair.Packet) { p.Release() }
	path, err := newPath(s, o.Clock, release, release)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runName(s), err)
	}
	defer path.close()

	ctx, cancel := context.WithTimeout(ctx, s.Duration)
	defer cancel()
	start := o.Clock.Now()
	log.Info("run start", zap.Duration("duration", s.Duration),
		zap.String("uplink", describe(s.Uplink)), zap.String("downlink", describe(s.Downlink)))
	path.start(ctx)

	// A run ends when all its flows are done or at its duration. This
	// version has no traffic flows, so a run is over as soon as its path
	// is up; the lab adds the flows to wait for here.
	elapsed := o.Clock.Now().Sub(start)
	path.close()

	rs := &RunSummary{
		Variant:   s.Variant,
		Seed:      s.Seed,
		DurationS: elapsed.Seconds(),
		Links:     []LinkSummary{linkSummary(s.Uplink, path.Up.Stats()), linkSummary(s.Downlink, path.Down.Stats())},
	}
	log.Info("run end", zap.Duration("elapsed", elapsed),
		zap.Uint64("uplink_packets", rs.Links[0].PacketsOut), zap.Uint64("downlink_packets", rs.Links[1].PacketsOut))
	return rs, nil
}

func runName(s *scenario.Scenario) string {
	if s.Variant == "" {
		return s.Name
	}
	return s.Name + "/" + s.Variant
}
