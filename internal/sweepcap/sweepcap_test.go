package sweepcap

import (
	"fmt"
	"testing"
)

func TestRuns(t *testing.T) {
	eight := []int{512, 512, 512, 512, 512, 512, 512, 512}
	for _, c := range []struct {
		values          []int
		seeds, variants int
		want            string // the count, or the error
	}{
		{[]int{4, 2, 2}, 3, 1, "48"},
		{[]int{100, 100}, 10, 1, "100000"},
		{[]int{100, 100}, 5, 3, "150000 runs (10000 combinations of 2 keys, times 5 seeds, times 3 variants), more than 100000"},
		{[]int{200}, 1000, 1, "200000 runs (200 values of one key, times 1000 seeds), more than 100000"},
		{nil, 100001, 1, "100001 runs (100001 seeds), more than 100000"},
		// 2^72: an int wraps it to 0.
		{eight, 1, 1, "4722366482869645213696 runs (4722366482869645213696 combinations of 8 keys, times 1 seed), more than 100000"},
		{append(eight, 0), 1, 1, "0"},
	} {
		n, err := Runs(c.values, c.seeds, c.variants)
		got := fmt.Sprint(n)
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("Runs(%v, %d, %d) = %s, want %s", c.values, c.seeds, c.variants, got, c.want)
		}
	}
}
