package flows

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/netjam/netjam/outdir"
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
// Its memory is bounded whatever the run's length and sample interval: it
// holds at most spillRows rows (about 50 bytes each), and writes them out
// in CSV form to a file of its own when it has that many. That file is
// unlinked as soon as it is made, so nothing is left behind on any exit;
// WriteCSV reads it back.
type Series struct {
	variant string // the run's variant, the first column of its rows

	mu    sync.Mutex // guards everything below
	start time.Time
	rows  []row
	prev  map[string]Sample // the last sample of each flow
	dir   *outdir.Dir       // where the spill file is made; nil: os.TempDir
	spill *os.File          // rows written out, in CSV form; nil until needed
	size  int64             // bytes written to spill
	err   error             // the spill's first error; rows are lost after it
	lost  int               // rows dropped after err
	tap   func(kind, name string, value float64)
}

// Tap makes f see each row as it is added (nil: none), for a run's live
// view. f is called with the series' lock held: it must not call back
// into the series, and must return at once.
func (s *Series) Tap(f func(kind, name string, value float64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tap = f
}

// spillRows is how many rows a Series holds before it writes them out:
// 16384 rows take about 800 KB.
const spillRows = 1 << 14

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

// SpillTo makes the series write the rows it no longer holds into a
// nameless file in dir (the run's output folder, say) instead of
// os.TempDir, which may be held in memory (tmpfs). Call it before the
// first row; dir must stay open until the series is closed.
func (s *Series) SpillTo(dir *outdir.Dir) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dir = dir
}

func (s *Series) add(now time.Time, kind, name string, value float64) {
	if s.err != nil && len(s.rows) >= spillRows {
		s.lost++
		return
	}
	t := float64(now.Sub(s.start)) / 1e9
	s.rows = append(s.rows, row{t, kind, name, value})
	if s.tap != nil {
		s.tap(kind, name, value)
	}
	if len(s.rows) >= spillRows && s.err == nil {
		s.err = s.writeOut()
	}
}

// writeOut appends the rows held to the spill file, making it first.
func (s *Series) writeOut() error {
	if s.spill == nil {
		f, err := scratch(s.dir)
		if err != nil {
			return fmt.Errorf("time series: %w", err)
		}
		s.spill = f
	}
	cw := &countingWriter{w: s.spill}
	err := writeRows(cw, s.variant, s.rows)
	s.size += cw.n
	if err != nil {
		return fmt.Errorf("time series: %w", err)
	}
	s.rows = s.rows[:0]
	return nil
}

// scratch makes a nameless file in dir, or in os.TempDir when dir is
// nil: unlinked at once, it lives as long as its descriptor.
func scratch(dir *outdir.Dir) (*os.File, error) {
	if dir != nil {
		return dir.Scratch()
	}
	f, err := os.CreateTemp("", ".netjam-series-*.csv")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Close releases the file the series' rows were written out to; the
// series is empty afterwards. It is safe to call more than once.
func (s *Series) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = nil
	if s.spill == nil {
		return nil
	}
	err := s.spill.Close()
	s.spill, s.size = nil, 0
	return err
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
// exactly. If a series could not write its rows out (a full disk), WriteCSV
// writes what it has and returns that error with the number of rows lost.
func WriteCSV(w io.Writer, series ...*Series) error {
	if _, err := io.WriteString(w, "variant,time_s,kind,name,value\n"); err != nil {
		return err
	}
	for _, s := range series {
		if err := s.writeCSV(w); err != nil {
			return err
		}
	}
	return nil
}

// writeCSV writes s's rows: those written out, then those held.
func (s *Series) writeCSV(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spill != nil {
		if _, err := io.Copy(w, io.NewSectionReader(s.spill, 0, s.size)); err != nil {
			return fmt.Errorf("time series: %w", err)
		}
	}
	if err := writeRows(w, s.variant, s.rows); err != nil {
		return err
	}
	if s.err != nil {
		return fmt.Errorf("%w (%d rows of run %q lost)", s.err, s.lost, s.variant)
	}
	return nil
}

// writeRows writes rows of variant as CSV records.
func writeRows(w io.Writer, variant string, rows []row) error {
	cw := csv.NewWriter(w)
	rec := make([]string, 5)
	for _, r := range rows {
		rec[0] = variant
		rec[1] = strconv.FormatFloat(r.t, 'f', -1, 64)
		rec[2], rec[3] = r.kind, r.name
		rec[4] = strconv.FormatFloat(r.value, 'f', -1, 64)
		cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}
