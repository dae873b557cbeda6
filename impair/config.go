package impair

import (
	"errors"
	"fmt"
	"time"

	"github.com/netjam/netjam/clock"
)

// Config describes one direction of the emulated path. The zero value is a
// transparent direction: no loss, no delay, unlimited rate. Package scenario
// describes what users write; the emulator turns that into a Config.
type Config struct {
	// Name names the direction in counters and logs ("uplink").
	Name string
	// Seed drives every random decision of the direction.
	Seed uint64

	Loss      LossConfig
	Duplicate Chance
	Corrupt   Chance
	Queue     QueueConfig
	Rate      RateConfig
	Slot      SlotConfig
	Delay     DelayConfig
	Reorder   ReorderConfig

	// InflightLimit bounds the packets held after the bottleneck (slot
	// gate and delay line). 0 means DefaultInflightLimit.
	InflightLimit int
	// InflightBytes bounds the memory of the packets each of those
	// stages holds, counting each packet's buffer: with segmentation
	// offload a packet may take 64 KiB, so a bound in packets alone
	// would let one line hold a gigabyte. 0 means DefaultInflightBytes.
	// Past either bound packets are dropped, counted as DropInflight.
	InflightBytes int64
	// InputLimit bounds the Runner's input channel. 0 means
	// DefaultInputLimit.
	InputLimit int
}

// Defaults for the limits of a Config.
const (
	DefaultInflightLimit = 16384
	// DefaultInflightBytes holds 10 Gbit/s for 100 ms of delay.
	DefaultInflightBytes = 128 << 20
	DefaultInputLimit    = 4096
	DefaultQueueLimit    = 1000
)

// Chance is a per-packet probability with optional correlation between
// consecutive decisions (see newChance for what correlation means).
type Chance struct {
	P           float64 // probability, 0..1
	Correlation float64 // 0..1 (exclusive)
}

// LossModel selects how losses are drawn.
type LossModel uint8

// Loss models, named as netem names them.
const (
	LossNone   LossModel = iota
	LossRandom           // Bernoulli with optional correlation
	LossGE               // Gilbert-Elliott: netem "loss gemodel p r 1-h 1-k"
	LossState            // 4-state Markov: netem "loss state p13 p31 p32 p23 p14"
)

var lossNames = []string{"none", "random", "gemodel", "state"}

// String returns the model's name as netem writes it ("gemodel"), or
// "none".
func (m LossModel) String() string {
	if int(m) < len(lossNames) {
		return lossNames[m]
	}
	return fmt.Sprintf("LossModel(%d)", m)
}

// LossConfig configures the loss stage.
type LossConfig struct {
	Model LossModel
	// Random: P is the loss probability, Correlation the lag-1 correlation.
	// Gilbert-Elliott: P is the good-to-bad transition probability.
	P, Correlation float64
	// Gilbert-Elliott: R bad-to-good, OneMinusH loss probability in the bad
	// state, OneMinusK loss probability in the good state.
	R, OneMinusH, OneMinusK float64
	// 4-state Markov transition probabilities, as netem's "loss state".
	P13, P31, P32, P23, P14 float64
}

// Distribution is the shape of delay jitter.
type Distribution uint8

// Jitter distributions, as netem names them.
const (
	Uniform      Distribution = iota // uniform in [-jitter, +jitter]
	Normal                           // standard deviation = jitter
	Pareto                           // Pareto (alpha 3), standardized, sd = jitter
	ParetoNormal                     // netem's blend of quantiles, (normal + 3*pareto)/4, standardized, sd = jitter
)

var distNames = []string{"uniform", "normal", "pareto", "paretonormal"}

func (d Distribution) String() string {
	if int(d) < len(distNames) {
		return distNames[d]
	}
	return fmt.Sprintf("Distribution(%d)", d)
}

// ParseDistribution maps a netem distribution name to a Distribution.
func ParseDistribution(s string) (Distribution, error) {
	for i, n := range distNames {
		if n == s {
			return Distribution(i), nil
		}
	}
	return 0, fmt.Errorf("unknown distribution %q (expected one of: uniform, normal, pareto, paretonormal)", s)
}

// DelayConfig configures the delay line.
type DelayConfig struct {
	Time         time.Duration // base one-way delay
	Jitter       time.Duration // spread, see Distribution
	Distribution Distribution
	// Correlation is the lag-1 correlation of the Gaussian process behind
	// the jitter draws (a copula, so each draw keeps its exact
	// distribution); it equals the draws' own correlation for Normal and
	// is a little less for the other shapes.
	Correlation float64
	// AllowReorder lets jitter reorder packets, as netem does. By default a
	// packet never leaves before the one ahead of it.
	AllowReorder bool
}

// ReorderConfig is netem's "reorder P [corr] gap G": every Gap-th packet is
// sent past the delay line with probability P.
type ReorderConfig struct {
	P, Correlation float64
	Gap            int // >= 1; 0 means 1
}

// RateConfig configures the serializer.
type RateConfig struct {
	Bitrate uint64 // bits per second; 0 means unlimited
	// Trace, instead of Bitrate, gives the link's capacity as a schedule
	// of delivery opportunities (mahimahi's traces); the overheads apply
	// to what each packet takes of them.
	Trace *Trace
	// PacketOverhead is added to each packet's length when computing its
	// transmission time (may be negative), as netem's packetoverhead.
	PacketOverhead int
	// CellSize and CellOverhead model cell-based links (ATM): the packet
	// is rounded up to whole cells of CellSize bytes, each costing
	// CellSize+CellOverhead bytes of transmission.
	CellSize, CellOverhead int
}

// SlotConfig is netem's "slot": packets leave in bursts at slot boundaries
// spaced by a uniform random time in [Min, Max]; each slot carries at most
// Packets packets and Bytes bytes (0: no limit).
type SlotConfig struct {
	Min, Max time.Duration
	Packets  int
	Bytes    int64
}

// limited reports whether the rate limits the link at all.
func (r RateConfig) limited() bool { return r.Bitrate > 0 || r.Trace != nil }

// Limited reports whether the rate limits the link: a bitrate or a trace.
func (r RateConfig) Limited() bool { return r.limited() }

func (s SlotConfig) enabled() bool { return s.Min > 0 || s.Max > 0 }

// Discipline selects the bottleneck queue's discipline.
type Discipline uint8

// Queue disciplines.
const (
	DropTail Discipline = iota
	HeadDrop
	CoDel   // RFC 8289
	FQCoDel // RFC 8290
	PIE     // RFC 8033
)

var discNames = []string{"droptail", "headdrop", "codel", "fq_codel", "pie"}

func (d Discipline) String() string {
	if int(d) < len(discNames) {
		return discNames[d]
	}
	return fmt.Sprintf("Discipline(%d)", d)
}

// ParseDiscipline maps a discipline name to a Discipline.
func ParseDiscipline(s string) (Discipline, error) {
	for i, n := range discNames {
		if n == s {
			return Discipline(i), nil
		}
	}
	return 0, fmt.Errorf("unknown queue discipline %q (expected one of: droptail, headdrop, codel, fq_codel, pie)", s)
}

// QueueConfig configures the bottleneck queue. Zero values of the tuning
// fields take the RFCs' defaults.
type QueueConfig struct {
	Discipline   Discipline
	LimitPackets int   // 0: no packet limit (if LimitBytes is 0 too: DefaultQueueLimit)
	LimitBytes   int64 // 0: no byte limit
	// ECN marks ECN-capable packets CE instead of dropping them when the
	// AQM decides to drop. Overflow still drops.
	ECN bool

	Target   time.Duration // CoDel/FQ-CoDel 5ms; PIE 15ms
	Interval time.Duration // CoDel/FQ-CoDel 100ms
	Flows    int           // FQ-CoDel 1024
	Quantum  int           // FQ-CoDel 1514
	TUpdate  time.Duration // PIE 15ms
	Alpha    float64       // PIE 0.125
	Beta     float64       // PIE 1.25
	MaxBurst time.Duration // PIE 150ms
}

// KeepsSegments reports whether no stage of the direction decides per
// packet (no loss, duplication, corruption, rate, slots, jitter or
// reordering; a fixed delay is fine): a GSO packet then crosses it whole
// and is never cut.
func (c *Config) KeepsSegments() bool {
	return c.Loss.Model == LossNone && c.Duplicate.P == 0 && c.Corrupt.P == 0 && !c.Rate.limited() &&
		!c.Slot.enabled() && c.Delay.Jitter == 0 && c.Reorder.P == 0
}

// TakesSegments reports whether GSO packets may enter the direction
// whole: when every stage it has either keeps them (KeepsSegments) or
// decides on each of their segments as it would on MTU-sized packets and
// cuts them only where its decisions differ:
//   - loss, of any model, draws each segment's fate in order, as for
//     packets one by one; a GSO packet with a loss is split there
//     (lossStage);
//   - a fixed rate of at least WholeRate behind a drop-tail queue counts
//     the queue's limits in segments and serializes each segment; it puts
//     on the wire at once only the segments that take at most
//     clock.Slack together, the precision of the runner that delivers
//     them (bottleneck).
//
// Otherwise (duplication, corruption, jitter, reordering, slots, an AQM
// or head-drop queue, a trace, a slower rate) they are split into their
// segments on the way in.
func (c *Config) TakesSegments() bool {
	rateOK := !c.Rate.limited() || c.Rate.Trace == nil && c.Rate.Bitrate >= WholeRate && c.Queue.Discipline == DropTail
	return rateOK && c.Duplicate.P == 0 && c.Corrupt.P == 0 &&
		!c.Slot.enabled() && c.Delay.Jitter == 0 && c.Reorder.P == 0
}

// Loses reports whether a stage drops or spoils packets by chance: a loss
// model, or corruption (which the receiver drops). A queue's drops are
// not by chance: they follow the rate, which a receiver's ACKs clock.
func (c *Config) Loses() bool { return c.Loss.Model != LossNone || c.Corrupt.P > 0 }

// WholeRate is the slowest rate at which a direction takes GSO packets
// whole (TakesSegments): two full-size Ethernet frames (1500 bytes) take
// clock.Slack to serialize, so that the rate stage puts on the wire at
// once at least two segments of that size. Below it packets are few
// enough to be taken one by one.
const WholeRate = 2 * 1500 * 8 * uint64(time.Second/clock.Slack)

// Validate reports every out-of-range field. Package scenario gives users
// better messages; this guards the library's own invariants.
func (c *Config) Validate() error {
	var k checks
	k.loss(c.Loss)
	k.prob("duplicate.p", c.Duplicate.P)
	k.corr("duplicate.correlation", c.Duplicate.Correlation)
	k.prob("corrupt.p", c.Corrupt.P)
	k.corr("corrupt.correlation", c.Corrupt.Correlation)
	k.prob("reorder.p", c.Reorder.P)
	k.corr("reorder.correlation", c.Reorder.Correlation)
	k.check(c.Reorder.Gap >= 0, "reorder.gap: must be >= 1")
	k.check(c.Delay.Time >= 0 && c.Delay.Jitter >= 0, "delay: time and jitter must be >= 0")
	k.corr("delay.correlation", c.Delay.Correlation)
	if c.Delay.Distribution > ParetoNormal {
		k.add(fmt.Errorf("delay.distribution: unknown %d", c.Delay.Distribution))
	}
	k.check(c.Slot.Min >= 0 && c.Slot.Max >= c.Slot.Min, "slot: need 0 <= min <= max")
	k.check(c.Slot.Packets >= 0 && c.Slot.Bytes >= 0, "slot: packets and bytes must be >= 0")
	k.check(c.Rate.CellSize >= 0, "rate.cell_size: must be >= 0")
	if t := c.Rate.Trace; t != nil {
		k.check(c.Rate.Bitrate == 0, "rate: a bitrate or a trace, not both")
		if err := t.Validate(); err != nil {
			k.add(fmt.Errorf("rate.trace: %w", err))
		}
	}
	q := c.Queue
	if q.Discipline > PIE {
		k.add(fmt.Errorf("queue.discipline: unknown %d", q.Discipline))
	}
	k.check(q.LimitPackets >= 0 && q.LimitBytes >= 0, "queue: limits must be >= 0")
	k.check(q.Flows >= 0 && q.Flows <= 65536 && q.Quantum >= 0, "queue: flows must be in 0..65536 and quantum >= 0")
	k.check(c.InflightLimit >= 0 && c.InputLimit >= 0 && c.InflightBytes >= 0, "inflight and input limits must be >= 0")
	return errors.Join(k.errs...)
}

// checks collects a configuration's errors, in the order found.
type checks struct{ errs []error }

func (k *checks) add(err error) { k.errs = append(k.errs, err) }

// check adds the error msg unless ok.
func (k *checks) check(ok bool, msg string) {
	if !ok {
		k.add(errors.New(msg))
	}
}

func (k *checks) prob(name string, v float64) {
	if !(v >= 0 && v <= 1) {
		k.add(fmt.Errorf("%s: %v is not a probability in [0, 1]", name, v))
	}
}

func (k *checks) corr(name string, v float64) {
	if !(v >= 0 && v < 1) {
		k.add(fmt.Errorf("%s: %v is not a correlation in [0, 1)", name, v))
	}
}

// loss checks the loss model's parameters.
func (k *checks) loss(l LossConfig) {
	switch l.Model {
	case LossNone:
	case LossRandom:
		k.prob("loss.p", l.P)
		k.corr("loss.correlation", l.Correlation)
	case LossGE:
		k.prob("loss.p", l.P)
		k.prob("loss.r", l.R)
		k.prob("loss.1-h", l.OneMinusH)
		k.prob("loss.1-k", l.OneMinusK)
	case LossState:
		for _, f := range []struct {
			n string
			v float64
		}{{"p13", l.P13}, {"p31", l.P31}, {"p32", l.P32}, {"p23", l.P23}, {"p14", l.P14}} {
			k.prob("loss."+f.n, f.v)
		}
		k.check(!(l.P13+l.P14 > 1), "loss: p13+p14 exceeds 1")
		k.check(!(l.P31+l.P32 > 1), "loss: p31+p32 exceeds 1")
	default:
		k.add(fmt.Errorf("loss: unknown model %d", l.Model))
	}
}

// MeanLoss returns the long-run loss ratio the model produces, started in
// its good state: what a calibration compares the measured loss with.
func (l LossConfig) MeanLoss() float64 {
	switch l.Model {
	case LossRandom:
		return l.P // the correlated chance keeps the mean exactly (see chance)
	case LossGE:
		if l.P+l.R == 0 {
			return l.OneMinusK
		}
		bad := l.P / (l.P + l.R)
		return (1-bad)*l.OneMinusK + bad*l.OneMinusH
	case LossState:
		// States 1..4 as netem numbers them (index 0..3): 1 good, 2 good
		// within a burst, 3 burst loss, 4 isolated loss. The Cesàro
		// average of the state distribution converges for every chain,
		// also reducible or periodic ones that a closed form would have
		// to treat case by case.
		P := [4][4]float64{
			{1 - l.P13 - l.P14, 0, l.P13, l.P14},
			{0, 1 - l.P23, l.P23, 0},
			{l.P31, l.P32, 1 - l.P31 - l.P32, 0},
			{1, 0, 0, 0},
		}
		pi := [4]float64{1, 0, 0, 0}
		var sum [4]float64
		const n = 200000
		for range n {
			var nx [4]float64
			for i := range 4 {
				for j := range 4 {
					nx[j] += pi[i] * P[i][j]
				}
			}
			pi = nx
			for j := range 4 {
				sum[j] += pi[j]
			}
		}
		return (sum[2] + sum[3]) / n
	}
	return 0
}
