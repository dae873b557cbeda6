package wifi

import (
	"math"
	"time"
)

// format is a PPDU format: how a frame's bytes and rate become air time.
type format uint8

const (
	// fmtDSSS is the DSSS (clause 15) and HR/DSSS (clause 16) long PPDU:
	// a 144 us preamble and 48 us header at 1 Mbit/s, then the PSDU, whose
	// LENGTH field counts whole microseconds.
	fmtDSSS format = iota
	// fmtOFDM is the OFDM PPDU of clause 17 (802.11a): a 16 us preamble,
	// a 4 us SIGNAL symbol, then 16 SERVICE bits, the PSDU and 6 tail bits
	// in whole 4 us symbols (TXTIME, 17.4.3).
	fmtOFDM
	// fmtERP is the ERP-OFDM PPDU of clause 18 (802.11g): the OFDM PPDU
	// followed by a 6 us signal extension, so that SIFS in the 2.4 GHz band
	// (10 us) leaves receivers the 16 us of OFDM decoding they need.
	fmtERP
	// fmtHT is the HT-mixed PPDU of clause 19 (802.11n) with one spatial
	// stream, 20 MHz and the 800 ns guard interval: the legacy preamble and
	// L-SIG (20 us), HT-SIG (8 us), HT-STF (4 us) and one HT-LTF (4 us),
	// then SERVICE, PSDU and tail bits in 4 us symbols (TXTIME, 19.4.3).
	fmtHT
)

// OFDM timing shared by fmtOFDM, fmtERP and fmtHT (clauses 17 and 19).
const (
	ofdmSymbol     = 4 * time.Microsecond
	ofdmPreamble   = 20 * time.Microsecond // L-STF 8 + L-LTF 8 + SIGNAL/L-SIG 4
	htPreamble     = ofdmPreamble + 16*time.Microsecond
	ofdmServiceLen = 16 // SERVICE field bits
	ofdmTailLen    = 6  // BCC tail bits (one encoder)
	erpSignalExt   = 6 * time.Microsecond
	dsssPLCP       = 192 * time.Microsecond // long preamble 144 + PLCP header 48, both at 1 Mbit/s
)

// MAC frame sizes in bytes (clause 9).
const (
	llcSNAP    = 8  // LLC/SNAP header in front of the IP packet (RFC 1042)
	fcsLen     = 4  // frame check sequence
	ackLen     = 14 // ACK: frame control, duration, RA, FCS
	ctsLen     = 14
	rtsLen     = 20 // RTS: frame control, duration, RA, TA, FCS
	blockAck   = 32 // compressed BlockAck: 16 header + control 2 + SSC 2 + bitmap 8 + FCS 4
	delimLen   = 4  // A-MPDU subframe delimiter
	maxMSDU    = 2304
	maxIPBytes = maxMSDU - llcSNAP
)

// txTime returns the air time of a PPDU carrying a PSDU of n bytes at rate
// bit/s in format f: the standard's TXTIME.
func txTime(f format, n int, rate uint64) time.Duration {
	bits := uint64(n) * 8
	switch f {
	case fmtDSSS:
		us := (bits*1_000_000 + rate - 1) / rate // LENGTH: whole microseconds, rounded up
		return dsssPLCP + time.Duration(us)*time.Microsecond
	default:
		ndbps := rate / 250_000 // data bits per 4 us symbol
		nsym := (ofdmServiceLen + bits + ofdmTailLen + ndbps - 1) / ndbps
		d := time.Duration(nsym) * ofdmSymbol
		switch f {
		case fmtHT:
			return htPreamble + d
		case fmtERP:
			return ofdmPreamble + d + erpSignalExt
		}
		return ofdmPreamble + d
	}
}

// phy holds what a standard fixes: timing, contention window bounds, rates
// and the receiver sensitivities behind the SNR error model.
type phy struct {
	standard string
	data     format   // format of data frames
	ctrl     format   // format of control frames (RTS, CTS, ACK, BlockAck)
	rates    []uint64 // data rates, bit/s, ascending
	ctrlSet  []uint64 // rates control frames may use (BasicRate must be one)
	basic    []uint64 // the basic rate set of the preset BSS, ascending
	slot     time.Duration
	sifs     time.Duration
	cwMin    int
	cwMax    int
	header   int // MAC header bytes of a data frame: 24, or 26 with QoS control (HT)
	// rxStart is aRxPHYStartDelay, the part of ACKTimeout that covers the
	// start of the response's preamble.
	rxStart time.Duration
	// cca is aCCATime: how long after a transmission starts other stations'
	// carrier sense reports the medium busy. Stations whose backoff ends
	// within it transmit too and collide.
	cca time.Duration
	// eifsFmt and eifsRate give ACKTxTime in EIFS: an ACK at the lowest
	// mandatory rate of the PHY (10.3.2.3.7).
	eifsFmt  format
	eifsRate uint64
	// A-MPDU limits (HT only): maximum A-MPDU length (65535 bytes with
	// exponent 3), BlockAck window (64 MPDUs), and aPPDUMaxTime of an
	// HT-mixed PPDU, whose L-SIG cannot announce more.
	ampduBytes, ampduFrames int
	ppduMax                 time.Duration
	// Receiver minimum sensitivity (dBm) per data rate (parallel to rates),
	// defined as the input level giving frame error rate sensPER for
	// sensLen-byte frames.
	sens    []float64
	sensLen int
	sensPER float64
}

var (
	dsssRates = []uint64{1_000_000, 2_000_000, 5_500_000, 11_000_000}
	ofdmRates = []uint64{6_000_000, 9_000_000, 12_000_000, 18_000_000, 24_000_000, 36_000_000, 48_000_000, 54_000_000}
	// htRates are MCS 0-7: one spatial stream, 20 MHz, 800 ns guard interval.
	htRates   = []uint64{6_500_000, 13_000_000, 19_500_000, 26_000_000, 39_000_000, 52_000_000, 58_500_000, 65_000_000}
	ofdmBasic = []uint64{6_000_000, 12_000_000, 24_000_000} // the mandatory OFDM rates
	// Receiver minimum input sensitivities: the OFDM table of clause 17
	// (PER 10%, 1000-byte PSDU) and the HT table of clause 19 (20 MHz, PER
	// 10%, 4096 bytes). DSSS and HR/DSSS specify one level each (FER 8%,
	// 1024 bytes): -80 dBm at 2 Mbit/s (clause 15) and -76 dBm at 11
	// Mbit/s (clause 16); 1 and 5.5 Mbit/s take the level of the faster
	// rate of the same family, a conservative choice.
	ofdmSens = []float64{-82, -81, -79, -77, -74, -70, -66, -65}
	htSens   = []float64{-82, -79, -77, -74, -70, -66, -65, -64}
	dsssSens = []float64{-80, -80, -76, -76}
)

// phys are the presets, by standard name (802.11-2016 clause numbers).
var phys = map[string]*phy{
	// 802.11b: HR/DSSS (clause 16), long preamble, basic rates 1 and 2
	// Mbit/s.
	"802.11b": {
		standard: "802.11b", data: fmtDSSS, ctrl: fmtDSSS,
		rates: dsssRates, ctrlSet: dsssRates, basic: dsssRates[:2],
		slot: 20 * time.Microsecond, sifs: 10 * time.Microsecond, cwMin: 31, cwMax: 1023,
		header: 24, rxStart: 192 * time.Microsecond, cca: 15 * time.Microsecond,
		eifsFmt: fmtDSSS, eifsRate: 1_000_000,
		sens: dsssSens, sensLen: 1024, sensPER: 0.08,
	},
	// 802.11a: OFDM (clause 17), 20 MHz, 5 GHz.
	"802.11a": {
		standard: "802.11a", data: fmtOFDM, ctrl: fmtOFDM,
		rates: ofdmRates, ctrlSet: ofdmRates, basic: ofdmBasic,
		slot: 9 * time.Microsecond, sifs: 16 * time.Microsecond, cwMin: 15, cwMax: 1023,
		header: 24, rxStart: 25 * time.Microsecond, cca: 4 * time.Microsecond,
		eifsFmt: fmtOFDM, eifsRate: 6_000_000,
		sens: ofdmSens, sensLen: 1000, sensPER: 0.1,
	},
	// 802.11g: ERP-OFDM (clause 18) in a BSS without 802.11b stations:
	// short slot, no protection, OFDM basic rates. EIFS still counts an
	// ACK at 1 Mbit/s DSSS, the ERP's lowest mandatory rate.
	"802.11g": {
		standard: "802.11g", data: fmtERP, ctrl: fmtERP,
		rates: ofdmRates, ctrlSet: ofdmRates, basic: ofdmBasic,
		slot: 9 * time.Microsecond, sifs: 10 * time.Microsecond, cwMin: 15, cwMax: 1023,
		header: 24, rxStart: 25 * time.Microsecond, cca: 4 * time.Microsecond,
		eifsFmt: fmtDSSS, eifsRate: 1_000_000,
		sens: ofdmSens, sensLen: 1000, sensPER: 0.1,
	},
	// 802.11n: HT-mixed (clause 19), one stream, 20 MHz, 5 GHz band; QoS
	// data frames (26-byte header); control frames in non-HT OFDM.
	"802.11n": {
		standard: "802.11n", data: fmtHT, ctrl: fmtOFDM,
		rates: htRates, ctrlSet: ofdmRates, basic: ofdmBasic,
		slot: 9 * time.Microsecond, sifs: 16 * time.Microsecond, cwMin: 15, cwMax: 1023,
		header: 26, rxStart: 25 * time.Microsecond, cca: 4 * time.Microsecond,
		eifsFmt: fmtOFDM, eifsRate: 6_000_000,
		ampduBytes: 65535, ampduFrames: 64, ppduMax: 5484 * time.Microsecond,
		sens: htSens, sensLen: 4096, sensPER: 0.1,
	},
}

// ctrlRate returns the rate of the control frames of an exchange at data
// rate r: the highest rate of the basic rate set not above r (the rule for
// control responses, 10.6.6.5). RTS uses it too.
func (ph *phy) ctrlRate(r uint64) uint64 {
	c := ph.basic[0]
	for _, b := range ph.basic {
		if b <= r {
			c = b
		}
	}
	return c
}

// noiseFloor is the noise at a receiver: kTB over 20 MHz (-101 dBm) plus a
// 10 dB noise figure. A rate's threshold SNR is its sensitivity minus it
// (see "Frame errors" in the package documentation).
const noiseFloor = -91.0 // dBm

// lnSuccessPerBit returns ln(1 - BER) for the given rate index and SNR
// (dB), so that a frame of n bytes survives with probability
// exp(8n * lnSuccessPerBit). BER is BER0 * 10^-(snr - threshold), at most
// 1/2, with BER0 such that a sensLen-byte frame is lost with probability
// sensPER at the threshold.
func (ph *phy) lnSuccessPerBit(rateIdx int, snr float64) float64 {
	threshold := ph.sens[rateIdx] - noiseFloor
	ber0 := -math.Expm1(math.Log1p(-ph.sensPER) / float64(8*ph.sensLen))
	ber := math.Min(0.5, ber0*math.Pow(10, -(snr-threshold)))
	return math.Log1p(-ber)
}

// rateIndex returns the index of r in ph.rates, or -1.
func (ph *phy) rateIndex(r uint64) int {
	for i, x := range ph.rates {
		if x == r {
			return i
		}
	}
	return -1
}
