package flows

// Jain returns Jain's fairness index of the non-negative values xs
// (typically the flows' throughputs): (Σx)² / (n·Σx²). It is 1 when all
// values are equal and 1/n when one of n values has everything; it is 0,
// which no real index is, when the index is undefined (no values, or all
// zero), so that a report never carries a NaN.
func Jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return min(sum*sum/(float64(len(xs))*sq), 1) // rounding may overshoot 1
}
