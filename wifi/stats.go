package wifi

import (
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/stats"
)

// DropReason says why a frame was dropped.
type DropReason uint8

// Drop reasons, one counter each. The names are what reports print.
const (
	DropQueue   DropReason = iota // the queue was at its limit
	DropRetry                     // RetryLimit transmissions failed
	DropInput                     // a Runner's input channel was full
	DropFlushed                   // still queued when the medium was closed
	NumDropReasons
)

var dropNames = [NumDropReasons]string{"queue", "retry", "input", "flushed"}

// String returns the reason's report name.
func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// counters are one contender's statistics. The medium's goroutine writes
// them (a Runner's senders add input drops); anyone may read them at any
// time.
type counters struct {
	attempts, successes, collisions, errors, retries atomic.Uint64
	delivered, deliveredBytes                        atomic.Uint64
	// firstAt and lastAt are the medium times (ns) of the first and the
	// latest delivery, firstBytes the first one's size: see Throughput.
	firstAt, lastAt atomic.Int64
	firstBytes      atomic.Uint64
	drops           [NumDropReasons]atomic.Uint64
	airtime         atomic.Int64 // ns
	queue           atomic.Int64
	delay           stats.Histogram // ns, enqueue to end of the acknowledged exchange
}

// StationStats are one contender's counters: a station (uplink) or the AP
// (downlink).
type StationStats struct {
	Name string `json:"name"`
	// Attempts counts the frame exchanges the contender started (an RTS,
	// or a data frame or A-MPDU); each ends in one of Successes (ACK or
	// BlockAck received), Collisions (another contender started in the
	// same slot) or Errors (the data was lost to a frame error).
	Attempts   uint64 `json:"attempts"`
	Successes  uint64 `json:"successes"`
	Collisions uint64 `json:"collisions"`
	Errors     uint64 `json:"errors"`
	// Retries counts MPDU transmissions that were retransmissions.
	Retries uint64 `json:"retries"`
	// Delivered and DeliveredBytes count the MPDUs acknowledged and their
	// IP bytes (also the synthetic frames of a saturated station).
	Delivered      uint64            `json:"delivered"`
	DeliveredBytes uint64            `json:"delivered_bytes"`
	Drops          map[string]uint64 `json:"drops,omitempty"`
	// Airtime is the time the contender's exchanges held the medium, from
	// the start of its first frame to the end of the ACK (or of its own
	// frame when it failed); AirtimeShare is Airtime over Elapsed.
	Airtime      time.Duration `json:"airtime_ns"`
	AirtimeShare float64       `json:"airtime_share"`
	// Throughput is the IP bit rate delivered, in bit/s, over the
	// interval in which the contender's frames were delivered: the bytes
	// delivered after the first delivery over the time from the first to
	// the last, as a flow's throughput is defined (flows.FlowSummary), so
	// that a station that carries one UDP flow reports that flow's figure
	// plus its IP and UDP headers (28 bytes a datagram).
	Throughput float64 `json:"throughput_bps"`
	// Delay is, per delivered MPDU, the time from its enqueueing to the end
	// of the exchange that delivered it (queueing, contention, retries and
	// transmission), in ns. For a saturated station it is the MAC service
	// time of each frame from the moment it reached the head of the queue.
	Delay stats.Summary `json:"delay_ns"`
	// Queue is the current backlog in frames, the frame in transmission
	// and a saturated station's synthetic frames included.
	Queue int64 `json:"queue"`
}

// Stats is a point-in-time report of a medium.
type Stats struct {
	Standard string `json:"standard"`
	// Elapsed is the simulated time since the medium's first event.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Busy is the time the medium carried frame exchanges (including
	// collisions); Utilization is Busy over Elapsed.
	Busy        time.Duration `json:"busy_ns"`
	Utilization float64       `json:"utilization"`
	Exchanges   uint64        `json:"exchanges"`
	Collisions  uint64        `json:"collisions"`
	// Stations holds station i at index i; AP is the access point.
	Stations []StationStats `json:"stations"`
	AP       StationStats   `json:"ap"`
	// Lateness is how far behind the logical delivery time a Runner
	// delivered packets (ns); zero for a Medium driven directly.
	Lateness stats.Summary `json:"lateness_ns"`
}

func (c *counters) snapshot(name string, elapsed time.Duration) StationStats {
	s := StationStats{
		Name:           name,
		Attempts:       c.attempts.Load(),
		Successes:      c.successes.Load(),
		Collisions:     c.collisions.Load(),
		Errors:         c.errors.Load(),
		Retries:        c.retries.Load(),
		Delivered:      c.delivered.Load(),
		DeliveredBytes: c.deliveredBytes.Load(),
		Airtime:        time.Duration(c.airtime.Load()),
		Delay:          c.delay.Snapshot(),
		Queue:          c.queue.Load(),
	}
	for r := DropReason(0); r < NumDropReasons; r++ {
		if n := c.drops[r].Load(); n > 0 {
			if s.Drops == nil {
				s.Drops = make(map[string]uint64)
			}
			s.Drops[r.String()] = n
		}
	}
	if elapsed > 0 {
		s.AirtimeShare = float64(s.Airtime) / float64(elapsed)
	}
	if first, last := c.firstAt.Load(), c.lastAt.Load(); s.Delivered > 1 && last > first {
		s.Throughput = float64(s.DeliveredBytes-c.firstBytes.Load()) * 8 / time.Duration(last-first).Seconds()
	}
	return s
}
