// Package stats holds the measurement primitives shared by netjam's packet
// path and its reports: a lock-free, allocation-free histogram for delays and
// sizes, and the percentile summary every report prints.
package stats

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits is the number of mantissa bits kept per power of two. 64 buckets an
// octave bound the relative error of a reported percentile by 1/128 (the
// bucket midpoint is reported), well below what any network measurement
// resolves.
const subBits = 6

const (
	subCount = 1 << subBits
	// maxExp bounds the recorded range to [0, 2^40) (about 18 minutes in
	// nanoseconds, or a terabyte); larger values are clamped to the top
	// bucket but still count exactly in Sum and Max.
	maxExp     = 40 - subBits - 1
	numBuckets = subCount + (maxExp+1)*subCount
)

// Histogram counts non-negative integer values (nanoseconds, bytes, packets)
// in log-linear buckets. Record is safe for concurrent use and allocates
// nothing; Snapshot may run at any time alongside it.
type Histogram struct {
	count   atomic.Uint64
	sum     atomic.Uint64
	max     atomic.Uint64
	min     atomic.Uint64 // stored as ^v so that the zero value means "none"
	buckets [numBuckets]atomic.Uint64
}

// bucketOf maps v to its bucket index.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // v>>e is in [subCount, 2*subCount)
	if e > maxExp {
		return numBuckets - 1
	}
	return subCount + e*subCount + int(v>>uint(e)) - subCount
}

// bucketRange returns the smallest value of bucket i and its width.
func bucketRange(i int) (lo, width uint64) {
	if i < subCount {
		return uint64(i), 1
	}
	e := (i - subCount) / subCount
	m := uint64((i-subCount)%subCount + subCount)
	return m << uint(e), 1 << uint(e)
}

// Record adds one observation of v; negative values count as zero.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	h.buckets[bucketOf(u)].Add(1)
	h.count.Add(1)
	h.sum.Add(u)
	for m := h.max.Load(); u > m && !h.max.CompareAndSwap(m, u); m = h.max.Load() {
	}
	for m := h.min.Load(); (m == 0 || u < ^m) && !h.min.CompareAndSwap(m, ^u); m = h.min.Load() {
	}
}

// RecordDuration records d in nanoseconds.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Totals returns the number of observations and their sum so far: cheap,
// for the mean over an interval as a difference of two readings.
func (h *Histogram) Totals() (count, sum uint64) { return h.count.Load(), h.sum.Load() }

// Count returns the number of observations so far.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// Summary is a histogram's digest: what reports print for a delay or size.
// Values are in the unit that was recorded (nanoseconds for durations).
type Summary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Scale returns s with every value multiplied by f (Count untouched), e.g.
// 1e-6 to turn nanoseconds into milliseconds.
func (s Summary) Scale(f float64) Summary {
	s.Mean *= f
	s.Min *= f
	s.P50 *= f
	s.P95 *= f
	s.P99 *= f
	s.Max *= f
	return s
}

// Snapshot digests the observations recorded so far. Under concurrent
// Record calls it sees each observation either whole or not at all in the
// buckets; Count, Mean and Max may be a few observations apart from them.
func (h *Histogram) Snapshot() Summary {
	var counts [numBuckets]uint64
	var total uint64
	for i := range h.buckets {
		c := h.buckets[i].Load()
		counts[i] = c
		total += c
	}
	if total == 0 {
		return Summary{}
	}
	s := Summary{
		Count: total,
		Mean:  float64(h.sum.Load()) / float64(h.count.Load()),
		Min:   float64(^h.min.Load()),
		Max:   float64(h.max.Load()),
	}
	s.P50 = h.quantile(&counts, total, 0.50, s.Min, s.Max)
	s.P95 = h.quantile(&counts, total, 0.95, s.Min, s.Max)
	s.P99 = h.quantile(&counts, total, 0.99, s.Min, s.Max)
	return s
}

// Quantile returns the q-quantile (0 <= q <= 1) of the observations, or 0
// when there are none.
func (h *Histogram) Quantile(q float64) float64 {
	var counts [numBuckets]uint64
	var total uint64
	for i := range h.buckets {
		counts[i] = h.buckets[i].Load()
		total += counts[i]
	}
	if total == 0 {
		return 0
	}
	return h.quantile(&counts, total, q, float64(^h.min.Load()), float64(h.max.Load()))
}

// quantile uses the nearest-rank definition: the smallest value v such that
// at least q*total observations are <= v. It reports the midpoint of v's
// bucket, clamped to the exact observed min and max.
func (h *Histogram) quantile(counts *[numBuckets]uint64, total uint64, q, lo, hi float64) float64 {
	rank := uint64(math.Ceil(q * float64(total)))
	if rank < 1 {
		rank = 1
	}
	var cum uint64
	for i, c := range counts {
		cum += c
		if cum >= rank {
			b, w := bucketRange(i)
			v := float64(b) + float64(w-1)/2
			return math.Min(math.Max(v, lo), hi)
		}
	}
	return hi
}

// Reset forgets every observation. It must not run concurrently with Record.
func (h *Histogram) Reset() {
	h.count.Store(0)
	h.sum.Store(0)
	h.max.Store(0)
	h.min.Store(0)
	for i := range h.buckets {
		h.buckets[i].Store(0)
	}
}
