// Package sweepcap counts the runs of a sweep and bounds them: one count
// for netjam sweep, which plans the runs, and for netjam merge, which
// reads the plan back and must not believe a number it did not check.
package sweepcap

import (
	"fmt"
	"math/big"
	"strings"
)

// Max is the most runs a sweep may have, its combinations times its seeds
// times its variants: enough for a study, not a typo's worth of runs.
// Planning 100000 runs takes some seconds and some hundred MB.
const Max = 100000

// Runs returns the number of runs of a sweep whose keys have values[i]
// values each, run with seeds seeds and variants variants (1 for a
// scenario without variants), or an error naming its factors when that is
// more than Max. The product is exact (math/big): eight keys of 512
// values make 2^72 combinations, which an int wraps to 0.
func Runs(values []int, seeds, variants int) (int, error) {
	combos := big.NewInt(1)
	for _, v := range values {
		combos.Mul(combos, big.NewInt(int64(v)))
	}
	runs := new(big.Int).Mul(combos, big.NewInt(int64(seeds)))
	runs.Mul(runs, big.NewInt(int64(variants)))
	if runs.Cmp(big.NewInt(Max)) <= 0 {
		return int(runs.Int64()), nil
	}
	var what []string
	switch len(values) {
	case 0:
	case 1:
		what = append(what, fmt.Sprintf("%s values of one key", combos))
	default:
		what = append(what, fmt.Sprintf("%s combinations of %d keys", combos, len(values)))
	}
	what = append(what, fmt.Sprintf("%d %s", seeds, plural(seeds, "seed")))
	if variants != 1 {
		what = append(what, fmt.Sprintf("%d variants", variants))
	}
	return 0, fmt.Errorf("%s runs (%s), more than %d", runs, strings.Join(what, ", times "), Max)
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}
