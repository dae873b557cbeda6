package control

import (
	"math"
	"strconv"
	"unsafe"

	"github.com/netjam/netjam/summary"
)

// Limits of the series a run keeps from its start (GET /v1/series), for a
// page opened late to plot the whole run.
const (
	// seriesBudget bounds the bytes the series store holds: its points'
	// times and every series' values, counted at the capacity allocated,
	// and the series' names.
	seriesBudget = 4 << 20
	// maxSeriesPoints bounds the points whatever the budget: the plots
	// are about 500 pixels wide, and a page fetches them all at once.
	maxSeriesPoints = 2048
	// maxSeries bounds the series (a kind of row and a name): the rows
	// of any more are not kept, and counted.
	maxSeries = 512
	// minSeriesCap is a new store's capacity, in points.
	minSeriesCap = 16
)

// point is one point of the series store: the samples from the one at
// From to the one at To (their times from the run's start), N of them.
type point struct {
	From, To float64
	N        uint64
}

// cell is one series' aggregate over a point: the N samples it had a
// value in (0: none, a gap), and their least, greatest and mean values.
type cell struct {
	N              uint64
	Min, Max, Mean float64
}

// Sizes of what the store holds per point, for its budget.
const (
	pointBytes = int(unsafe.Sizeof(point{}))
	cellBytes  = int(unsafe.Sizeof(cell{}))
	// columnBytes is a series' fixed cost beside its cells: its column
	// and index entry (its names are counted apart).
	columnBytes = 96
)

// column is one series: its rows' kind and name (timeseries.csv's), a
// cell per point, and its last sample's value.
type column struct {
	kind, name string
	cells      []cell
	last       float64
}

// seriesKey names a series.
type seriesKey struct{ kind, name string }

// seriesStore keeps a run's samples from its start in bounded memory:
// every sample as a point of its own until the store is full (its
// budget, or maxSeriesPoints), then adjacent points merged in pairs
// (halve): each point then stands for twice as many samples, its
// series' min, max and mean over them; later samples fill points of the
// same width. So the whole run is there at one resolution, the finest
// the budget allows, however long it runs. It is not safe for concurrent
// use.
type seriesStore struct {
	budget, maxPoints, maxCols int
	interval                   float64 // the run's sample interval, in seconds

	// level: each point holds up to 1<<level samples; all but the last
	// hold that many.
	level  int
	points []point
	cols   []column
	index  map[seriesKey]int
	// capPoints is the capacity of points and of every column's cells.
	capPoints int
	// names is what the series' names and fixed costs take.
	names int

	scratch []int // add's, the rows' columns: no allocation per sample

	samples     uint64 // samples taken in
	halvings    uint64 // times the points were merged in pairs
	rowsDropped uint64 // rows not kept: of a series past the limits, or not a number
}

// seriesPoints is maxSeriesPoints but in tests, which halve sooner.
var seriesPoints = maxSeriesPoints

func newSeriesStore() *seriesStore {
	return &seriesStore{budget: seriesBudget, maxPoints: seriesPoints, maxCols: maxSeries, index: map[seriesKey]int{}}
}

// bytes is what the store holds, counted at the capacity allocated.
func (s *seriesStore) bytes() int {
	return s.names + s.capPoints*(pointBytes+len(s.cols)*cellBytes)
}

// limit is the most points the store may hold with ncols series and
// names bytes of names.
func (s *seriesStore) limit(ncols, names int) int {
	return min(s.maxPoints, (s.budget-names)/(pointBytes+ncols*cellBytes))
}

// add takes in the sample at time t (from the run's start): its rows.
func (s *seriesStore) add(t float64, rows []summary.SeriesRow) {
	s.samples++
	cols := s.scratch[:0]
	for _, r := range rows {
		cols = append(cols, s.column(r))
	}
	s.scratch = cols
	s.place(t)
	p := len(s.points) - 1
	for i, r := range rows {
		if cols[i] < 0 {
			continue
		}
		c := &s.cols[cols[i]]
		c.cells[p].take(r.Value)
		c.last = r.Value
	}
}

// column returns the index of r's series, made if new; -1 when r is not
// kept (counted).
func (s *seriesStore) column(r summary.SeriesRow) int {
	if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		s.rowsDropped++
		return -1
	}
	k := seriesKey{r.Kind, r.Name}
	if i, ok := s.index[k]; ok {
		return i
	}
	names := s.names + columnBytes + len(r.Kind) + len(r.Name)
	lim := s.limit(len(s.cols)+1, names)
	if len(s.cols) >= s.maxCols || lim < 2 {
		s.rowsDropped++
		return -1
	}
	// A new series takes a cell for every point: with the budget's
	// share of each point grown, fewer points fit.
	for len(s.points) > lim {
		s.halve()
	}
	s.names = names
	s.cols = append(s.cols, column{kind: r.Kind, name: r.Name, cells: make([]cell, len(s.points), s.capPoints)})
	s.index[k] = len(s.cols) - 1
	if s.capPoints > lim {
		s.resize(lim)
	}
	return len(s.cols) - 1
}

// place makes the point the sample at t goes into the last one: the last
// point while it holds fewer than 1<<level samples, else a new one, made
// room for by growing the store or, at its limit, halving it.
func (s *seriesStore) place(t float64) {
	if s.lastOpen() {
		s.extendLast(t)
		return
	}
	if len(s.points) == s.capPoints {
		if lim := s.limit(len(s.cols), s.names); s.capPoints < lim {
			s.resize(min(max(2*s.capPoints, minSeriesCap), lim))
		} else if s.halve(); s.lastOpen() {
			s.extendLast(t) // an odd last point stayed alone
			return
		}
	}
	s.points = append(s.points, point{From: t, To: t, N: 1})
	for i := range s.cols {
		s.cols[i].cells = append(s.cols[i].cells, cell{})
	}
}

// lastOpen reports whether the last point holds fewer samples than a
// point of the level may.
func (s *seriesStore) lastOpen() bool {
	n := len(s.points)
	return n > 0 && s.level < 64 && s.points[n-1].N < 1<<s.level
}

// extendLast adds the sample at t to the last point.
func (s *seriesStore) extendLast(t float64) {
	p := &s.points[len(s.points)-1]
	p.To = t
	p.N++
}

// halve merges the points in pairs, in place: each then holds up to
// twice as many samples (level+1); an odd last point stays alone.
func (s *seriesStore) halve() {
	n := len(s.points)
	for i := 0; i < n/2; i++ {
		a, b := s.points[2*i], s.points[2*i+1]
		s.points[i] = point{From: a.From, To: b.To, N: a.N + b.N}
	}
	if n%2 == 1 {
		s.points[n/2] = s.points[n-1]
	}
	for c := range s.cols {
		cells := s.cols[c].cells
		for i := 0; i < n/2; i++ {
			cells[i] = merge(cells[2*i], cells[2*i+1])
		}
		if n%2 == 1 {
			cells[n/2] = cells[n-1]
		}
		s.cols[c].cells = cells[:(n+1)/2]
	}
	s.points = s.points[:(n+1)/2]
	s.level++
	s.halvings++
}

// resize gives points and every column capacity n (at least the points
// held).
func (s *seriesStore) resize(n int) {
	s.capPoints = n
	s.points = append(make([]point, 0, n), s.points...)
	for i := range s.cols {
		s.cols[i].cells = append(make([]cell, 0, n), s.cols[i].cells...)
	}
}

// take adds the value v of one more sample to c.
func (c *cell) take(v float64) {
	if c.N == 0 {
		*c = cell{N: 1, Min: v, Max: v, Mean: v}
		return
	}
	c.N++
	c.Min, c.Max = min(c.Min, v), max(c.Max, v)
	c.Mean += (v - c.Mean) / float64(c.N)
}

// merge is the cell of a's samples and b's together.
func merge(a, b cell) cell {
	switch {
	case a.N == 0:
		return b
	case b.N == 0:
		return a
	}
	n := a.N + b.N
	return cell{N: n, Min: min(a.Min, b.Min), Max: max(a.Max, b.Max), Mean: a.Mean + (b.Mean-a.Mean)*float64(b.N)/float64(n)}
}

// SeriesSnapshot is GET /v1/series's answer: the run's series from its
// start, each point the aggregate of one or more samples.
type SeriesSnapshot struct {
	// Seq is the event of the stream the series is up to: GET
	// /v1/events?after=SEQ continues from there, none missed or twice.
	Seq uint64 `json:"seq"`
	// RunSeq is the event that started the run (its run event): the
	// series and GET /v1/timeline's are the same run's when equal; 0
	// before any run.
	RunSeq          uint64  `json:"run_seq"`
	SampleIntervalS float64 `json:"sample_interval_s"`
	// Level: each point merges up to 2^level samples (0: each is one);
	// Halvings, how many times the points were merged in pairs.
	Level    int    `json:"level"`
	Halvings uint64 `json:"halvings"`
	// Samples are the samples taken in since the run's start;
	// RowsDropped, the rows of them not kept (a series past the limits,
	// a value not a number).
	Samples     uint64 `json:"samples"`
	RowsDropped uint64 `json:"rows_dropped"`
	// Bytes is what the store holds, of BudgetBytes; MaxPoints bounds
	// the points whatever the budget.
	Bytes       int `json:"bytes"`
	BudgetBytes int `json:"budget_bytes"`
	MaxPoints   int `json:"max_points"`
	// FromS and ToS are each point's first and last sample's times (from
	// the run's start), N its samples.
	FromS  floats   `json:"from_s"`
	ToS    floats   `json:"to_s"`
	N      []uint64 `json:"n"`
	Series []Series `json:"series"`
}

// Series is one series of SeriesSnapshot: a kind of timeseries.csv's
// rows (throughput_bps, link_bps, ...) for a name (a flow, a direction),
// and per point the mean, least and greatest value of its samples (null
// where it had none: a gap), and its last sample's value.
type Series struct {
	Kind string  `json:"kind"`
	Name string  `json:"name"`
	Mean floats  `json:"mean"`
	Min  floats  `json:"min"`
	Max  floats  `json:"max"`
	Last float64 `json:"last"`
}

// floats marshals as a JSON array, NaN as null.
type floats []float64

func (f floats) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(f)*10)
	b = append(b, '[')
	for i, v := range f {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// copy returns a copy of the store's points and columns, cheap (no
// allocation per point): for snapshot to turn into an answer without
// holding the lock the store is under.
func (s *seriesStore) copy() *seriesStore {
	c := *s
	c.points = append([]point(nil), s.points...)
	c.cols = make([]column, len(s.cols))
	for i, col := range s.cols {
		col.cells = append([]cell(nil), col.cells...)
		c.cols[i] = col
	}
	c.index, c.scratch = nil, nil
	return &c
}

// snapshot is the store as GET /v1/series answers it.
func (s *seriesStore) snapshot() SeriesSnapshot {
	out := SeriesSnapshot{Level: s.level, Halvings: s.halvings, Samples: s.samples, RowsDropped: s.rowsDropped,
		Bytes: s.bytes(), BudgetBytes: s.budget, MaxPoints: s.maxPoints,
		FromS: make(floats, len(s.points)), ToS: make(floats, len(s.points)), N: make([]uint64, len(s.points)),
		Series: make([]Series, len(s.cols))}
	for i, p := range s.points {
		out.FromS[i], out.ToS[i], out.N[i] = p.From, p.To, p.N
	}
	for i, c := range s.cols {
		sr := Series{Kind: c.kind, Name: c.name, Last: c.last,
			Mean: make(floats, len(c.cells)), Min: make(floats, len(c.cells)), Max: make(floats, len(c.cells))}
		for j, x := range c.cells {
			if x.N == 0 {
				sr.Mean[j], sr.Min[j], sr.Max[j] = math.NaN(), math.NaN(), math.NaN()
				continue
			}
			sr.Mean[j], sr.Min[j], sr.Max[j] = x.Mean, x.Min, x.Max
		}
		out.Series[i] = sr
	}
	return out
}
