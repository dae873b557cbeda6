package emulator

import (
	"context"
	"sync"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/wifi"
)

// Kinds of the link rows of the time series, next to the flows' kinds.
const (
	kindQueuePackets = "queue_packets"         // bottleneck backlog at the sample time
	kindSojourn      = "sojourn_ms"            // mean queue sojourn of the packets dequeued in the interval
	kindLinkRate     = "link_bps"              // IP bits/s that left the direction in the interval
	kindCapacity     = "capacity_bps"          // bits/s a trace-driven link offered in the interval, used or not
	kindDrops        = "drops"                 // packets dropped in the interval, all reasons
	kindAirtime      = "airtime_share"         // a Wi-Fi station's (or the AP's) share of the interval on the medium
	kindCollisions   = "collisions"            // a Wi-Fi station's collisions in the interval
	kindConfRate     = "configured_rate_bps"   // a direction's rate in force at the sample time (a trace's mean; 0: unlimited)
	kindConfDelay    = "configured_delay_ms"   // its delay in force
	kindConfLoss     = "configured_loss_ratio" // its mean loss in force
)

// sampler records the run's time series: one goroutine woken by one timer
// every interval, reading each flow's Sample and each direction's
// counters (all atomic reads: it never stops the packet path).
type sampler struct {
	clk      clock.Clock
	interval time.Duration
	series   *flows.Series
	flows    []flows.Flow
	links    []*linkProbe
	cell     *wifi.Runner // nil without a Wi-Fi cell
	lastCell wifi.Stats
	// live, when not nil, is told each interval's rows (batch, gathered
	// from the series as they are added) for its watcher.
	live  *Live
	batch []summary.SeriesRow
	// configured adds each direction's settings in force to every
	// interval (kindConfRate, kindConfDelay, kindConfLoss): for a run whose
	// path changes (a timeline, the control API).
	configured bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// linkProbe keeps the previous reading of a direction, for rates.
type linkProbe struct {
	name  string
	r     *impair.Runner
	queue *impair.Counters // the bottleneck's, nil without one
	// capacity reads what a trace-driven bottleneck offered (at a fixed
	// rate it says it has nothing to read).
	capacity interface {
		CapacityBytes(time.Time) (int64, bool)
	}
	lastCap  int64
	lastT    time.Time
	lastOut  uint64
	lastDrop uint64
	lastN    uint64
	lastSum  uint64
}

func newSampler(clk clock.Clock, interval time.Duration, series *flows.Series, fls []flows.Flow, path *Path, cell *wifi.Runner) *sampler {
	s := &sampler{clk: clk, interval: interval, series: series, flows: fls, cell: cell}
	for _, r := range path.runners() {
		lp := &linkProbe{name: r.Chain().Name(), r: r, lastT: clk.Now()}
		lp.findQueue()
		s.links = append(s.links, lp)
	}
	return s
}

// findQueue looks for the direction's bottleneck. A timeline's change may
// bring one in later (a rate set on an unlimited link), so sample looks
// again while there is none; once there, a bottleneck stays (impair.Chain.Set).
func (lp *linkProbe) findQueue() {
	for _, st := range lp.r.Chain().Stages() {
		if st.Name() == "queue" {
			lp.queue = st.Counters()
			if c, ok := st.(interface {
				CapacityBytes(time.Time) (int64, bool)
			}); ok {
				lp.capacity = c
				// What it offered before sampling starts (the
				// handshakes') is not the first interval's.
				lp.lastCap, _ = c.CapacityBytes(lp.lastT)
			}
		}
	}
}

func (s *sampler) start(ctx context.Context) {
	if s.live != nil {
		// Rows are added on the sampler's goroutine only.
		s.series.Tap(func(kind, name string, v float64) {
			s.batch = append(s.batch, summary.SeriesRow{Kind: kind, Name: name, Value: v})
		})
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := s.clk.NewTimer(s.interval)
		defer t.Stop()
		next := s.clk.Now().Add(s.interval)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			s.sample(s.clk.Now())
			// Keep to the grid: a late tick does not shift later ones.
			next = next.Add(s.interval)
			if d := next.Sub(s.clk.Now()); d > 0 {
				t.Reset(d)
			} else {
				next = s.clk.Now().Add(s.interval)
				t.Reset(s.interval)
			}
		}
	}()
}

// stop ends sampling and takes a last sample, so that the series covers
// the whole run.
func (s *sampler) stop() {
	s.cancel()
	s.wg.Wait()
	s.sample(s.clk.Now())
}

func (s *sampler) sample(now time.Time) {
	// A series spills its rows to a file: a system call.
	clock.Hold(s.clk)
	defer clock.Release(s.clk)
	if s.live != nil {
		defer func() {
			s.live.sampled(now, s.batch)
			s.batch = nil
		}()
	}
	if s.cell != nil {
		s.sampleCell(now)
	}
	for _, f := range s.flows {
		s.series.Observe(f.Name(), f.Sample(now))
	}
	for _, l := range s.links {
		st := l.r.Chain().Counters()
		out := st.OutBytes.Load()
		var drops uint64
		for r := range impair.NumDropReasons {
			drops += l.r.Chain().Drops(r)
		}
		if dt := now.Sub(l.lastT).Seconds(); dt > 0 {
			s.series.Add(now, kindLinkRate, l.name, float64(out-l.lastOut)*8/dt)
			if l.capacity != nil {
				// Counted across traces a timeline switches
				// between; nothing written at a fixed rate.
				c, ok := l.capacity.CapacityBytes(now)
				if ok {
					s.series.Add(now, kindCapacity, l.name, float64(c-l.lastCap)*8/dt)
				}
				l.lastCap = c
			}
		}
		s.series.Add(now, kindDrops, l.name, float64(drops-l.lastDrop))
		if s.configured {
			cfg := l.r.Chain().Config()
			rate := float64(cfg.Rate.Bitrate)
			if cfg.Rate.Trace != nil {
				rate = cfg.Rate.Trace.MeanBitrate()
			}
			s.series.Add(now, kindConfRate, l.name, rate)
			s.series.Add(now, kindConfDelay, l.name, float64(cfg.Delay.Time)/1e6)
			s.series.Add(now, kindConfLoss, l.name, cfg.Loss.MeanLoss())
		}
		l.lastT, l.lastOut, l.lastDrop = now, out, drops
		if l.queue == nil {
			l.findQueue()
		}
		if l.queue != nil {
			s.series.Add(now, kindQueuePackets, l.name, float64(l.queue.QueueLen.Load()))
			n, sum := l.queue.Sojourn.Totals()
			if n > l.lastN {
				s.series.Add(now, kindSojourn, l.name, float64(sum-l.lastSum)/float64(n-l.lastN)/1e6)
			}
			l.lastN, l.lastSum = n, sum
		}
	}
}

// sampleCell adds each station's (and the AP's) airtime share and
// collisions over the interval since the last sample.
func (s *sampler) sampleCell(now time.Time) {
	st := s.cell.Stats()
	prev := s.lastCell
	dt := st.Elapsed - prev.Elapsed
	all := append(append([]wifi.StationStats(nil), st.Stations...), st.AP)
	before := append(append([]wifi.StationStats(nil), prev.Stations...), prev.AP)
	for i, c := range all {
		var p wifi.StationStats
		if i < len(before) && prev.Stations != nil {
			p = before[i]
		}
		name := c.Name
		if i == len(all)-1 {
			name = "ap"
		}
		if dt > 0 {
			s.series.Add(now, kindAirtime, name, float64(c.Airtime-p.Airtime)/float64(dt))
		}
		s.series.Add(now, kindCollisions, name, float64(c.Collisions-p.Collisions))
	}
	s.lastCell = st
}
