package wifi

import (
	"fmt"
	"math"
	"time"
)

// BianchiModel is Bianchi's analytic model of the saturation throughput of
// DCF: G. Bianchi, "Performance analysis of the IEEE 802.11 distributed
// coordination function", IEEE JSAC 18(3), March 2000.
//
// Each of n saturated stations transmits in a randomly chosen slot with
// probability τ, and a transmission collides with constant, independent
// probability p, so that
//
//	p = 1 - (1 - τ)^(n-1)
//
// and τ follows from the backoff chain. Bianchi's chain (eq. 7) has an
// infinite retry limit; with a finite one (RetryLimit transmissions, the
// extension of Wu et al., INFOCOM 2002, and Chatzimisios et al.) the same
// renewal argument gives
//
//	τ = Σ_{j<R} p^j / Σ_{j<R} p^j (W_j + 1)/2,   W_j = min(2^j (CWMin+1), CWMax+1)
//
// transmissions per frame over slots per frame: stage j is reached with
// probability p^j and spends a uniform backoff in [0, W_j - 1] plus one
// transmission slot. With R infinite and CWMax+1 = 2^m (CWMin+1) it is
// eq. (7). The throughput is eq. (13):
//
//	S = Ps Ptr E[P] / ((1 - Ptr) σ + Ptr Ps Ts + Ptr (1 - Ps) Tc)
//
// with Ptr = 1 - (1-τ)^n, Ps = n τ (1-τ)^(n-1) / Ptr. NewBianchiModel
// fills Ts and Tc from a PHY preset as Bianchi's Section IV does, for basic
// access and RTS/CTS, with no propagation delay.
type BianchiModel struct {
	Stations     int
	CWMin, CWMax int
	// RetryLimit is the number of transmissions after which a frame is
	// discarded; 0 is Bianchi's infinite retry limit.
	RetryLimit int
	// Slot is σ, Success Ts (the channel time of a successful exchange,
	// DIFS included), Collision Tc (that of a collision).
	Slot, Success, Collision time.Duration
	// PayloadBits is E[P], the bits a successful exchange delivers.
	PayloadBits float64
}

// BianchiResult is the solution of a BianchiModel.
type BianchiResult struct {
	Tau float64 // probability that a station transmits in a slot
	P   float64 // probability that a transmission collides
	Ptr float64 // probability that a slot carries a transmission
	Ps  float64 // probability that a transmission succeeds
	// Throughput is S in bit/s (S times the bit rate of the payload: the
	// payload delivered per second of channel time).
	Throughput float64
	// Drop is the probability that a frame is discarded at the retry
	// limit, p^R.
	Drop float64
}

// NewBianchiModel returns the model of n saturated stations of cfg's
// standard sending payload-byte IP packets at cfg's data rate, with Ts and
// Tc as Bianchi defines them for basic access:
//
//	Ts = DATA + SIFS + ACK + DIFS,  Tc = DATA + DIFS
//
// and for RTS/CTS:
//
//	Ts = RTS + SIFS + CTS + SIFS + DATA + SIFS + ACK + DIFS,  Tc = RTS + DIFS
//
// where DATA is the air time of the MPDU (PHY preamble and header, MAC
// header, LLC/SNAP, payload, FCS). cfg's stations are ignored.
func NewBianchiModel(cfg Config, n, payload int, rts bool) (BianchiModel, error) {
	if n < 1 || payload < 0 {
		return BianchiModel{}, fmt.Errorf("wifi: Bianchi model of %d stations and %d-byte payloads", n, payload)
	}
	cfg.Stations = []StationConfig{{}}
	p, err := cfg.resolve()
	if err != nil {
		return BianchiModel{}, fmt.Errorf("wifi: %w", err)
	}
	l := p.links[0]
	data := p.dataTime(p.mpduLen(payload), l.rate)
	b := BianchiModel{
		Stations:    n,
		CWMin:       p.cwMin,
		CWMax:       p.cwMax,
		RetryLimit:  p.retryLimit,
		Slot:        time.Duration(p.slot),
		Success:     time.Duration(data + p.sifs + l.tAck + p.difs),
		Collision:   time.Duration(data + p.difs),
		PayloadBits: float64(8 * payload),
	}
	if rts {
		b.Success += time.Duration(l.tRTS + p.sifs + l.tCTS + p.sifs)
		b.Collision = time.Duration(l.tRTS + p.difs)
	}
	return b, nil
}

// tau returns the transmission probability for collision probability p.
func (b BianchiModel) tau(p float64) float64 {
	var num, den float64
	pj := 1.0
	w := b.CWMin + 1
	for j := 0; b.RetryLimit == 0 || j < b.RetryLimit; j++ {
		num += pj
		den += pj * float64(w+1) / 2
		if b.RetryLimit == 0 && w >= b.CWMax+1 {
			// Every later stage has the maximum window: a geometric tail,
			// Σ_{i>j} p^i = p^(j+1) / (1-p).
			tail := pj * p / (1 - p)
			num += tail
			den += tail * float64(w+1) / 2
			break
		}
		pj *= p
		w = min(2*w, b.CWMax+1)
	}
	return num / den
}

// Solve finds the fixed point (τ, p) by bisection on p (the right-hand
// side 1 - (1 - τ(p))^(n-1) decreases in p, so the root is unique) and
// returns the throughput.
func (b BianchiModel) Solve() BianchiResult {
	var p float64
	if b.Stations > 1 {
		lo, hi := 0.0, 1-1e-12
		for range 200 {
			p = (lo + hi) / 2
			if 1-math.Pow(1-b.tau(p), float64(b.Stations-1)) > p {
				lo = p
			} else {
				hi = p
			}
		}
		p = (lo + hi) / 2
	}
	t := b.tau(p)
	n := float64(b.Stations)
	r := BianchiResult{Tau: t, P: p}
	r.Ptr = 1 - math.Pow(1-t, n)
	r.Ps = n * t * math.Pow(1-t, n-1) / r.Ptr
	slot := (1-r.Ptr)*b.Slot.Seconds() + r.Ptr*r.Ps*b.Success.Seconds() + r.Ptr*(1-r.Ps)*b.Collision.Seconds()
	r.Throughput = r.Ps * r.Ptr * b.PayloadBits / slot
	if b.RetryLimit > 0 {
		r.Drop = math.Pow(p, float64(b.RetryLimit))
	}
	return r
}
