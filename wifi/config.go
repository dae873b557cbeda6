package wifi

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Config describes one Wi-Fi cell: an access point and its stations
// sharing one channel. Zero fields take the values of the Standard's preset
// (see Preset); package scenario describes what users write and fills it.
type Config struct {
	// Standard selects the PHY preset: "802.11b", "802.11a", "802.11g" or
	// "802.11n".
	Standard string
	// Rate is the data rate (bit/s) of stations that set none. It must be
	// one of the standard's rates (for 802.11n: MCS 0-7, one stream).
	Rate uint64
	// BasicRate, when set, is the rate of every control frame (RTS, CTS,
	// ACK, BlockAck). By default each exchange uses the highest rate of the
	// preset's basic rate set not above its data rate, as 802.11 requires
	// of control responses (10.6.6.5).
	BasicRate uint64
	// Slot and SIFS are aSlotTime and aSIFSTime. DIFS is SIFS + 2 Slot,
	// EIFS is SIFS + DIFS + the air time of an ACK at the PHY's lowest
	// mandatory rate, ACKTimeout is SIFS + Slot + aRxPHYStartDelay.
	Slot, SIFS time.Duration
	// CWMin and CWMax bound the contention window; both are 2^k - 1.
	CWMin, CWMax int
	// RetryLimit is dot11ShortRetryLimit: the number of failed
	// transmissions after which a frame is discarded, so a frame is sent at
	// most RetryLimit times. It counts RTS and data failures alike (the
	// standard keeps a separate long retry count for frames sent after an
	// RTS; here one count and one limit serve both).
	RetryLimit int
	// RTSThreshold is dot11RTSThreshold: an MPDU (or A-MPDU) longer than
	// this many bytes is sent after an RTS/CTS exchange. The default,
	// 65535, never triggers; 1 protects every frame.
	RTSThreshold int
	// QueueLimit bounds, in packets, each station's queue and each of the
	// AP's per-station queues. When a queue is full, arrivals are dropped
	// and counted.
	QueueLimit int
	// AMPDU aggregates frames for the same receiver into one A-MPDU
	// acknowledged by a BlockAck (802.11n only), up to AMPDUMaxBytes bytes
	// (at most 65535) and AMPDUMaxFrames MPDUs (at most 64), and within
	// the 5.484 ms an HT-mixed PPDU may last.
	AMPDU                         bool
	AMPDUMaxBytes, AMPDUMaxFrames int
	// InputLimit bounds a Runner's input channel; 0 means
	// DefaultInputLimit.
	InputLimit int
	// Stations are the cell's stations, at least one. Station i of the
	// Medium is Stations[i].
	Stations []StationConfig
	// Seed drives every random decision (backoff draws, frame errors).
	Seed uint64
}

// Station returns the index in Stations of the station called name, or -1.
func (c *Config) Station(name string) int {
	for i, s := range c.Stations {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// StationConfig describes one station and its link with the AP (the same
// in both directions).
type StationConfig struct {
	// Name names the station in reports; by default "sta<i>".
	Name string
	// Rate is the data rate of the link (bit/s); 0 takes Config.Rate.
	Rate uint64
	// FrameErrorRate is the probability that a data frame (each MPDU of an
	// A-MPDU) is lost on this link, drawn per transmission. Control frames
	// are never lost.
	FrameErrorRate float64
	// SNR (dB), when not zero, derives the frame error rate of each data
	// frame from its length and the link's rate instead (see "Frame
	// errors" in the package documentation). It cannot be combined with
	// FrameErrorRate.
	SNR float64
	// Saturate, when positive, gives the station an endless backlog of
	// uplink frames carrying Saturate-byte IP packets: background load
	// that contends like any traffic but is never delivered, only counted.
	Saturate int
}

// Defaults for the limits of a Config.
const (
	DefaultRetryLimit   = 7     // dot11ShortRetryLimit
	DefaultRTSThreshold = 65535 // dot11RTSThreshold: off
	DefaultQueueLimit   = 1000
	DefaultInputLimit   = 4096
	// MaxStations is the number of association IDs an AP can hand out.
	MaxStations = 2007
)

// Standards lists the supported standards, in the order of their presets.
var Standards = []string{"802.11b", "802.11a", "802.11g", "802.11n"}

// Preset returns the full configuration of a standard with no stations:
// every field a zero Config field would take.
func Preset(standard string) (Config, error) {
	ph, ok := phys[standard]
	if !ok {
		return Config{}, unknownStandard(standard)
	}
	c := Config{
		Standard:     standard,
		Rate:         ph.rates[len(ph.rates)-1],
		Slot:         ph.slot,
		SIFS:         ph.sifs,
		CWMin:        ph.cwMin,
		CWMax:        ph.cwMax,
		RetryLimit:   DefaultRetryLimit,
		RTSThreshold: DefaultRTSThreshold,
		QueueLimit:   DefaultQueueLimit,
		InputLimit:   DefaultInputLimit,
	}
	if ph.ampduFrames > 0 {
		c.AMPDUMaxBytes, c.AMPDUMaxFrames = ph.ampduBytes, ph.ampduFrames
	}
	return c, nil
}

func unknownStandard(s string) error {
	return fmt.Errorf("standard: unknown %q (expected one of: %s)", s, strings.Join(Standards, ", "))
}

// Validate reports every invalid field, each with its path. Zero fields are
// valid: they take the preset's values.
func (c *Config) Validate() error {
	var e errList
	ph := phys[c.Standard]
	if ph == nil {
		e.errs = append(e.errs, unknownStandard(c.Standard))
	}
	c.validatePHY(&e, ph)
	c.validateLimits(&e, ph)
	for i, s := range c.Stations {
		s.validate(&e, "stations["+strconv.Itoa(i)+"]", c.Standard, ph)
	}
	return errors.Join(e.errs...)
}

// errList collects a configuration's errors, in the order found.
type errList struct{ errs []error }

func (e *errList) add(format string, a ...any) { e.errs = append(e.errs, fmt.Errorf(format, a...)) }

// validatePHY checks the rates and timings against ph, the standard's
// preset (nil: an unknown standard, already reported).
func (c *Config) validatePHY(e *errList, ph *phy) {
	if ph != nil && c.Rate != 0 && ph.rateIndex(c.Rate) < 0 {
		e.add("rate: %s is not a data rate of %s (expected one of: %s)", mbps(c.Rate), c.Standard, rateList(ph.rates))
	}
	if ph != nil && c.BasicRate != 0 && !contains(ph.ctrlSet, c.BasicRate) {
		e.add("basic_rate: %s is not a control frame rate of %s (expected one of: %s)", mbps(c.BasicRate), c.Standard, rateList(ph.ctrlSet))
	}
	if c.Slot < 0 || c.Slot%time.Microsecond != 0 || c.Slot > time.Millisecond {
		e.add("slot: %v is not a whole number of microseconds up to 1ms", c.Slot)
	}
	if c.SIFS < 0 || c.SIFS%time.Microsecond != 0 || c.SIFS > time.Millisecond {
		e.add("sifs: %v is not a whole number of microseconds up to 1ms", c.SIFS)
	}
	cw := func(name string, v int) {
		if v < 0 || v > 32767 || bits.OnesCount(uint(v+1)) != 1 {
			e.add("%s: %d is not of the form 2^k-1 in 1..32767", name, v)
		}
	}
	if c.CWMin != 0 {
		cw("cw_min", c.CWMin)
	}
	if c.CWMax != 0 {
		cw("cw_max", c.CWMax)
	}
	if ph != nil {
		lo, hi := c.CWMin, c.CWMax
		if lo == 0 {
			lo = ph.cwMin
		}
		if hi == 0 {
			hi = ph.cwMax
		}
		if hi < lo {
			e.add("cw_max: %d is below cw_min %d", hi, lo)
		}
	}
}

// validateLimits checks the retry, queue and aggregation limits and the
// number of stations.
func (c *Config) validateLimits(e *errList, ph *phy) {
	if c.RetryLimit < 0 || c.RetryLimit > 255 {
		e.add("retry_limit: %d is not in 1..255", c.RetryLimit)
	}
	if c.RTSThreshold < 0 || c.RTSThreshold > 65535 {
		e.add("rts_threshold: %d is not in 1..65535", c.RTSThreshold)
	}
	if c.QueueLimit < 0 || c.QueueLimit > 1<<20 {
		e.add("queue_limit: %d is not in 1..%d", c.QueueLimit, 1<<20)
	}
	if c.InputLimit < 0 {
		e.add("input_limit: %d is negative", c.InputLimit)
	}
	if c.AMPDU && ph != nil && ph.ampduFrames == 0 {
		e.add("ampdu: needs 802.11n, not %s", c.Standard)
	}
	if c.AMPDUMaxBytes < 0 || c.AMPDUMaxBytes > 65535 {
		e.add("ampdu_max_bytes: %d is not in 1..65535", c.AMPDUMaxBytes)
	}
	if c.AMPDUMaxFrames < 0 || c.AMPDUMaxFrames > 64 {
		e.add("ampdu_max_frames: %d is not in 1..64", c.AMPDUMaxFrames)
	}
	if len(c.Stations) == 0 || len(c.Stations) > MaxStations {
		e.add("stations: %d stations, need 1..%d", len(c.Stations), MaxStations)
	}
}

// validate checks station s, at path, of a cell of standard (its preset
// ph; nil: unknown).
func (s StationConfig) validate(e *errList, path, standard string, ph *phy) {
	if ph != nil && s.Rate != 0 && ph.rateIndex(s.Rate) < 0 {
		e.add("%s.rate: %s is not a data rate of %s (expected one of: %s)", path, mbps(s.Rate), standard, rateList(ph.rates))
	}
	if !(s.FrameErrorRate >= 0 && s.FrameErrorRate <= 1) {
		e.add("%s.frame_error_rate: %v is not a probability in [0, 1]", path, s.FrameErrorRate)
	}
	if s.SNR != 0 && s.FrameErrorRate != 0 {
		e.add("%s: set frame_error_rate or snr, not both", path)
	}
	if s.SNR < -50 || s.SNR > 100 { // also catches NaN below
		e.add("%s.snr: %v dB is not in -50..100", path, s.SNR)
	} else if s.SNR != s.SNR {
		e.add("%s.snr: NaN", path)
	}
	if s.Saturate < 0 || s.Saturate > maxIPBytes {
		e.add("%s.saturate: %d bytes is not in 0..%d (an unfragmented MSDU)", path, s.Saturate, maxIPBytes)
	}
}

func contains(s []uint64, v uint64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// mbps formats a rate in Mbit/s: "5.5 Mbit/s".
func mbps(r uint64) string { return strconv.FormatFloat(float64(r)/1e6, 'f', -1, 64) + " Mbit/s" }

func rateList(rs []uint64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.FormatFloat(float64(r)/1e6, 'f', -1, 64)
	}
	return strings.Join(s, ", ") + " Mbit/s"
}

// params is a validated Config resolved against its preset, in the units
// the simulation uses (nanoseconds).
type params struct {
	ph *phy
	// Times in ns. ackTimeout also serves as CTSTimeout: SIFS + slot +
	// aRxPHYStartDelay.
	slot, sifs, difs, eifs, cca, ackTimeout int64
	ppduMax                                 int64
	cwMin, cwMax                            int
	retryLimit, rtsThreshold                int
	queueLimit, inputLimit                  int
	ampdu                                   bool
	ampduBytes, ampduFrames                 int
	rate                                    uint64 // default data rate
	header                                  int    // MAC header bytes of data frames
	dataFmt                                 format
	stations                                []StationConfig
	names                                   []string
	links                                   []link // per station; the AP uses its receiver's
	seed                                    uint64
}

// link is what a frame exchange with one station costs and risks.
type link struct {
	rate, ctrl uint64
	// Control frame air times at the link's control rate.
	tAck, tBA, tRTS, tCTS int64
	fer                   float64 // fixed frame error rate
	snr                   bool    // derive the error rate from lnOK instead
	lnOK                  float64 // ln(1 - BER)
}

// resolve validates c and fills zero fields from the preset.
func (c *Config) resolve() (*params, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ph := phys[c.Standard]
	or := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	ord := func(v, d time.Duration) time.Duration {
		if v == 0 {
			return d
		}
		return v
	}
	p := &params{
		ph:           ph,
		slot:         int64(ord(c.Slot, ph.slot)),
		sifs:         int64(ord(c.SIFS, ph.sifs)),
		cwMin:        or(c.CWMin, ph.cwMin),
		cwMax:        or(c.CWMax, ph.cwMax),
		retryLimit:   or(c.RetryLimit, DefaultRetryLimit),
		rtsThreshold: or(c.RTSThreshold, DefaultRTSThreshold),
		queueLimit:   or(c.QueueLimit, DefaultQueueLimit),
		inputLimit:   or(c.InputLimit, DefaultInputLimit),
		ampdu:        c.AMPDU,
		ampduBytes:   or(c.AMPDUMaxBytes, ph.ampduBytes),
		ampduFrames:  or(c.AMPDUMaxFrames, ph.ampduFrames),
		ppduMax:      int64(ph.ppduMax),
		stations:     c.Stations,
		seed:         c.Seed,
		header:       ph.header,
		dataFmt:      ph.data,
		rate:         c.Rate,
	}
	if p.rate == 0 {
		p.rate = ph.rates[len(ph.rates)-1]
	}
	p.difs = p.sifs + 2*p.slot
	p.eifs = p.sifs + p.difs + int64(txTime(ph.eifsFmt, ackLen, ph.eifsRate))
	p.ackTimeout = p.sifs + p.slot + int64(ph.rxStart)
	p.cca = min(int64(ph.cca), p.slot)
	p.names = make([]string, len(c.Stations))
	p.links = make([]link, len(c.Stations))
	for i, s := range c.Stations {
		p.names[i] = s.Name
		if p.names[i] == "" {
			p.names[i] = "sta" + strconv.Itoa(i)
		}
		r := s.Rate
		if r == 0 {
			r = p.rate
		}
		l := link{rate: r, ctrl: c.BasicRate, fer: s.FrameErrorRate}
		if l.ctrl == 0 {
			l.ctrl = ph.ctrlRate(r)
		}
		l.tAck = int64(txTime(ph.ctrl, ackLen, l.ctrl))
		l.tCTS = int64(txTime(ph.ctrl, ctsLen, l.ctrl))
		l.tRTS = int64(txTime(ph.ctrl, rtsLen, l.ctrl))
		l.tBA = int64(txTime(ph.ctrl, blockAck, l.ctrl))
		if s.SNR != 0 {
			l.snr = true
			l.lnOK = ph.lnSuccessPerBit(ph.rateIndex(r), s.SNR)
		}
		p.links[i] = l
	}
	return p, nil
}

// mpduLen returns the length of the data MPDU carrying an n-byte IP packet:
// MAC header, LLC/SNAP, the packet, FCS.
func (p *params) mpduLen(n int) int { return p.header + llcSNAP + n + fcsLen }

// dataTime returns the air time of an n-byte PSDU at rate r.
func (p *params) dataTime(n int, r uint64) int64 { return int64(txTime(p.dataFmt, n, r)) }
