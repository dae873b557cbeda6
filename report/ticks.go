package report

import (
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// niceTicks places about n labelled ticks on round values (1, 2, 2.5 or 5
// times a power of ten) with unlabelled minor ticks between them: more
// than plot.DefaultTicks' three or so, which leave a 1200-pixel-wide time
// axis with labels every 4 s. With integer set, the step is at least 1
// (packets, segments: no "0.5 packets").
type niceTicks struct {
	n       int
	integer bool
}

// Ticks implements plot.Ticker.
func (nt niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	step, minors := niceStep((hi - lo) / float64(max(nt.n, 1)))
	if nt.integer && step < 1 {
		step, minors = 1, 1
	}
	dec := 0
	if step != math.Trunc(step) {
		// Enough decimals for the step: 0.25 needs two, 0.5 and 2.5
		// one (else 2.5 and 7.5 would read "2" and "8").
		if step < 1 {
			dec = int(math.Ceil(-math.Log10(step) - 1e-9))
		}
		s := strconv.FormatFloat(step, 'f', -1, 64)
		if i := strings.IndexByte(s, '.'); i >= 0 && len(s)-i-1 > dec {
			dec = len(s) - i - 1
		}
	}
	var ticks []plot.Tick
	minor := step / float64(minors)
	first := math.Ceil(lo/minor-1e-9) * minor
	for i := 0; ; i++ {
		v := first + float64(i)*minor
		if v > hi+minor*1e-9 {
			break
		}
		t := plot.Tick{Value: v}
		if r := math.Round(v / step); math.Abs(v/step-r) < 1e-6 {
			v = r * step
			if v == 0 {
				v = 0 // no "-0"
			}
			t.Value, t.Label = v, strconv.FormatFloat(v, 'f', dec, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// niceStep returns the round step nearest above raw and how many minor
// intervals to put in it.
func niceStep(raw float64) (step float64, minors int) {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch m := raw / p; {
	case m <= 1:
		return p, 5
	case m <= 2:
		return 2 * p, 4
	case m <= 2.5:
		return 2.5 * p, 5
	case m <= 5:
		return 5 * p, 5
	default:
		return 10 * p, 5
	}
}
