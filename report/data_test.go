package report

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"testing"
)

// TestReadSeriesThinsLongRuns reads a timeseries.csv of 300,000 samples
// per series (8 hours sampled every 100 ms), streamed: the report
// keeps a bounded number of points per series, the heap stays small, the
// drops add up to the file's total, and the mean throughput is the file's.
func TestReadSeriesThinsLongRuns(t *testing.T) {
	const n = 300_000
	r, w := io.Pipe()
	go func() {
		fmt.Fprintln(w, "variant,time_s,kind,name,value")
		for i := range n {
			// Throughput alternates 1 and 3 Mbit/s; 1 drop every 10th sample.
			fmt.Fprintf(w, ",%g,throughput_bps,bulk,%g\n,%g,drops,uplink,%d\n", float64(i)/10, 1e6+2e6*float64(i%2), float64(i)/10, min(1, i%10/9))
		}
		w.Close()
	}()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	series, order, err := readSeries(r)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grew := int64(ms.HeapAlloc) - int64(base); grew > 4<<20 {
		t.Errorf("the series read take %d MiB, want at most 4", grew>>20)
	}
	if len(order) != 1 || order[0] != "" {
		t.Fatalf("variants %q", order)
	}
	tp, drops := series[""].get(kindThroughput, "bulk"), series[""].get(kindDrops, "uplink")
	if len(tp) > 2*maxPoints || len(tp) < maxPoints || len(drops) != len(tp) {
		t.Errorf("%d throughput and %d drop points kept, want %d to %d each", len(tp), len(drops), maxPoints, 2*maxPoints)
	}
	var sum, mean float64
	for i, p := range drops {
		sum += p.v
		if p.t != tp[i].t {
			t.Fatalf("point %d: drops at %g s, throughput at %g s: series sampled together must stay together", i, p.t, tp[i].t)
		}
	}
	for _, p := range tp {
		mean += p.v / float64(len(tp))
	}
	if sum != n/10 {
		t.Errorf("drops add up to %g, want %d", sum, n/10)
	}
	if math.Abs(mean-2e6) > 2e6*1e-3 {
		t.Errorf("mean throughput %g, want 2e6", mean)
	}
	if last := tp[len(tp)-1].t; math.Abs(last-(n-1)/10.0) > float64(n)/10/maxPoints {
		t.Errorf("the last point is at %g s, want within a merged interval of %g", last, (n-1)/10.0)
	}
}
