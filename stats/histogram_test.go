package stats

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
)

func TestBucketsCoverRangeMonotonically(t *testing.T) {
	prevLo := uint64(0)
	for i := 1; i < numBuckets; i++ {
		lo, w := bucketRange(i)
		if lo <= prevLo {
			t.Fatalf("bucket %d starts at %d, not above bucket %d at %d", i, lo, i-1, prevLo)
		}
		if got := bucketOf(lo); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d", lo, got, i)
		}
		if got := bucketOf(lo + w - 1); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d (end of bucket)", lo+w-1, got, i)
		}
		prevLo = lo
	}
	if got := bucketOf(math.MaxUint64); got != numBuckets-1 {
		t.Fatalf("huge value lands in bucket %d, want the top one", got)
	}
}

func TestSmallValuesAreExact(t *testing.T) {
	var h Histogram
	for v := int64(0); v < 64; v++ {
		h.Record(v)
	}
	s := h.Snapshot()
	if s.Count != 64 || s.Min != 0 || s.Max != 63 || s.Mean != 31.5 {
		t.Fatalf("got %+v", s)
	}
	// nearest rank: the 32nd smallest of 0..63 is 31.
	if s.P50 != 31 {
		t.Fatalf("p50 = %v, want 31", s.P50)
	}
	if h.Quantile(1) != 63 || h.Quantile(0) != 0 {
		t.Fatalf("q(1)=%v q(0)=%v", h.Quantile(1), h.Quantile(0))
	}
}

// TestQuantilesWithinBucketError compares against exact order statistics of
// a sample: the reported value must be within the documented relative error.
func TestQuantilesWithinBucketError(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	vals := make([]float64, 100000)
	for i := range vals {
		v := int64(r.ExpFloat64() * 20e6) // exponential, mean 20 ms in ns
		vals[i] = float64(v)
		h.Record(v)
	}
	sort.Float64s(vals)
	s := h.Snapshot()
	for _, c := range []struct {
		q   float64
		got float64
	}{{0.5, s.P50}, {0.95, s.P95}, {0.99, s.P99}} {
		want := vals[int(math.Ceil(c.q*float64(len(vals))))-1]
		if rel := math.Abs(c.got-want) / want; rel > 1.0/128 {
			t.Errorf("q%.2f = %v, exact %v, relative error %.4f > 1/128", c.q, c.got, want, rel)
		}
	}
	if s.Max != vals[len(vals)-1] || s.Min != vals[0] {
		t.Errorf("min/max %v/%v, want %v/%v", s.Min, s.Max, vals[0], vals[len(vals)-1])
	}
}

func TestConcurrentRecord(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				h.Record(int64(i))
				_ = h.Snapshot().P50
			}
		}()
	}
	wg.Wait()
	if s := h.Snapshot(); s.Count != 4000 || s.Max != 999 {
		t.Fatalf("got %+v", s)
	}
}

func TestRecordAllocatesNothing(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Record(12345) }); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	for i := 0; b.Loop(); i++ {
		h.Record(int64(i))
	}
}
