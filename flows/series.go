package flows

import (
	"encoding/csv"
	"io"
	"strconv"
	"sync"
	"time"
)

// The kinds of rows Series.Observe writes. The emulator adds its own kinds
// (a link's queue_packets, sojourn_ms) with Series.Add.
const (
	KindThroughput = "throughput_bps" // payload received over the interval, bit/s
	KindCwnd       = "cwnd"           // latest congestion window, segments (TCP)
	KindSRTT       = "srtt_ms"        // latest smoothed RTT, ms (TCP)
	KindDelay      = "delay_ms"       // mean one-way delay of the datagrams received in the interval, ms (UDP)
)

// Series is a run's time series in long format: one row per time, kind and
// name (a flow or a link). It is safe for concurrent use.
//
// Rows are kept in memory until WriteCSV, about 50 bytes each: a 10-minute
// run with 10 flows of 3 kinds sampled every 100 ms is 180,000 rows, about
// 9 MB. That is meant for runs of minutes; sample less often for hours.
type Series struct {
	variant string // the run's variant, the first column of its rows

	mu    sync.Mutex // guards everything below
	start time.Time
	rows  []row
	prev  map[string]Sample // the last sample of each flow
}

// row is one row of the CSV: t seconds since the start.
type row struct {
	t     float64
	kind  string
	name  string
	value float64
}

// NewSeries returns an empty series of the run of variant ("" when the
// scenario has no variants) whose times count from start (the run's start,
// on the run's clock).
func NewSeries(variant string, start time.Time) *Series {
	return &Series{variant: variant, start: start, prev: map[string]Sample{}}
}

// Add appends a row: value of kind for name at now.
func (s *Series) Add(now time.Time, kind, name string, value float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(now, kind, name, value)
}

func (s *Series) add(now time.Time, kind, name string, value float64) {
	t := float64(now.Sub(s.start)) / 1e9
	s.rows = append(s.rows, row{t, kind, name, value})
}

// Observe appends the rows of flow name's sample smp, computed against its
// previous sample (or, for the first, against zero counters at the
// series' start):
//   - throughput_bps, the payload bytes received since then, in bit/s;
//   - for TCP with info, cwnd and srtt_ms from the sample;
//   - for UDP, delay_ms, the mean delay of the datagrams received since
//     then, when there are any.
//
// Samples of one flow must come in time order.
func (s *Series) Observe(name string, smp Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.prev[name]
	if !ok {
		prev = Sample{Time: s.start}
	}
	s.prev[name] = smp
	if dt := smp.Time.Sub(prev.Time); dt > 0 && smp.Bytes >= prev.Bytes {
		s.add(smp.Time, KindThroughput, name, bitRate(smp.Bytes-prev.Bytes, dt))
	}
	if smp.Type == TypeTCP && smp.Cwnd > 0 {
		s.add(smp.Time, KindCwnd, name, float64(smp.Cwnd))
		s.add(smp.Time, KindSRTT, name, float64(smp.SRTT)*nsPerMs)
	}
	if smp.Packets > prev.Packets {
		mean := float64(smp.DelaySum-prev.DelaySum) / float64(smp.Packets-prev.Packets)
		s.add(smp.Time, KindDelay, name, mean*nsPerMs)
	}
}

// WriteCSV writes the series of one or more runs as one CSV table with the
// header variant,time_s,kind,name,value, each series' rows in the order
// they were added. Numbers are in the shortest decimal form that reads back
// exactly.
func WriteCSV(w io.Writer, series ...*Series) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"variant", "time_s", "kind", "name", "value"})
	rec := make([]string, 5)
	for _, s := range series {
		s.mu.Lock()
		for _, r := range s.rows {
			rec[0] = s.variant
			rec[1] = strconv.FormatFloat(r.t, 'f', -1, 64)
			rec[2], rec[3] = r.kind, r.name
			rec[4] = strconv.FormatFloat(r.value, 'f', -1, 64)
			cw.Write(rec)
		}
		s.mu.Unlock()
	}
	cw.Flush()
	return cw.Error()
}
