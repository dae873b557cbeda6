package flows

import "fmt"

// Unfinished says how far a TCP flow the run's end cut short got, for
// tables and warnings: "unfinished: 1.2 of 5.0 MiB", or, for a flow
// bounded by a duration (size 0), "unfinished: 1.2 MB". A size that is a
// whole number of KiB is written in binary units, as a scenario that says
// 5MiB means it; any other in decimal ones (5MB is 5,000,000 bytes).
func Unfinished(received, size uint64) string {
	if size == 0 {
		return "unfinished: " + formatBytes(received, 1000, "kB", "MB", "GB")
	}
	base, units := uint64(1000), []string{"kB", "MB", "GB"}
	if size%1024 == 0 {
		base, units = 1024, []string{"KiB", "MiB", "GiB"}
	}
	s := formatBytes(size, base, units...)
	unit, div := "B", 1.0
	for i, u := range units {
		if m := pow(base, i+1); size >= m {
			unit, div = u, float64(m)
		}
	}
	if unit == "B" {
		return fmt.Sprintf("unfinished: %d of %s", received, s)
	}
	return fmt.Sprintf("unfinished: %.1f of %s", float64(received)/div, s)
}

// formatBytes writes n with one decimal in the largest of units (powers
// of base) it reaches, or in bytes.
func formatBytes(n, base uint64, units ...string) string {
	for i := len(units) - 1; i >= 0; i-- {
		if m := pow(base, i+1); n >= m {
			return fmt.Sprintf("%.1f %s", float64(n)/float64(m), units[i])
		}
	}
	return fmt.Sprintf("%d B", n)
}

func pow(b uint64, e int) uint64 {
	v := uint64(1)
	for range e {
		v *= b
	}
	return v
}
