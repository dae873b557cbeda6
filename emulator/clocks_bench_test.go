package emulator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netjam/netjam/scenario"
)

// BenchmarkClocksAgree runs every example scenario of configs/ that the
// lab runs (no tun section, no sweep) on the wall clock and on the
// virtual clock (those NETJAM_CLOCKS_FILES matches, a pattern of
// filepath.Glob relative to this package, when set), with seeds 1 to
// NETJAM_CLOCKS_SEEDS (5 when unset), as
// `netjam run` and `netjam run
// --clock virtual` would, and logs a table for docs/accuracy.md: for each
// variant and flow, a TCP flow's throughput and a UDP flow's median
// one-way delay, min / median / max over the seeds on each clock, and the
// ratio of the medians, virtual over wall. A variant the virtual clock
// refuses (TUN mode, a flow bounded by a duration across no rate) has no
// virtual figures.
// Each seed takes about ten minutes of wall time, one run after another;
// the figures are the machine's, so run it on an idle one:
//
//	go test -run XXX -bench ClocksAgree -benchtime 1x -timeout 3h ./emulator/
func BenchmarkClocksAgree(b *testing.B) {
	seeds := 5
	if v := os.Getenv("NETJAM_CLOCKS_SEEDS"); v != "" {
		if _, err := fmt.Sscan(v, &seeds); err != nil || seeds < 1 {
			b.Fatalf("NETJAM_CLOCKS_SEEDS=%q: want a number of seeds, 1 or more", v)
		}
	}
	for range b.N {
		clocksAgree(b, seeds)
	}
}

func clocksAgree(b *testing.B, seeds int) {
	pattern := "../configs/*.yaml"
	if v := os.Getenv("NETJAM_CLOCKS_FILES"); v != "" {
		pattern = v
	}
	files, err := filepath.Glob(pattern)
	if err != nil {
		b.Fatal(err)
	}
	type key struct{ file, variant, flow, what string }
	type sample struct{ wall, virtual []float64 }
	var t strings.Builder
	fmt.Fprintf(&t, "\n| scenario | variant | flow | figure | wall min / median / max | virtual min / median / max | virtual / wall |\n|---|---|---|---|---|---|---|\n")
	fmt.Fprint(os.Stderr, t.String())
	var refused []string
	for _, file := range files {
		got := map[key]*sample{}
		var keys []key
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		if strings.Contains(string(data), "\ntun:") || strings.Contains(string(data), "\nsweep:") {
			continue
		}
		name := filepath.Base(file)
		for i := range seeds {
			seed := uint64(i + 1)
			for _, virtual := range []bool{false, true} {
				o := scenario.Options{Seed: &seed}
				if virtual {
					o.Sets = []string{"clock=virtual"}
					var ok bool
					if o.Variants, ok = virtualVariants(file, data, o); !ok {
						if i == 0 {
							refused = append(refused, name)
						}
						continue
					}
				}
				plan, err := scenario.Parse(file, data, o)
				if err != nil {
					b.Fatal(err)
				}
				sum, err := Run(context.Background(), plan, Options{Virtual: virtual})
				if err != nil {
					b.Fatalf("%s, seed %d, virtual %v: %v", name, seed, virtual, err)
				}
				for _, r := range sum.Runs {
					for _, f := range r.Flows {
						k := key{name, r.Variant, f.Name, "Mbit/s"}
						v := f.ThroughputBps / 1e6
						if f.UDPSummary != nil {
							k.what, v = "delay p50 ms", f.DelayMs.P50
						}
						s := got[k]
						if s == nil {
							s = &sample{}
							got[k] = s
							keys = append(keys, k)
						}
						if virtual {
							s.virtual = append(s.virtual, v)
						} else {
							s.wall = append(s.wall, v)
						}
					}
				}
			}
		}
		// The rows of this scenario, on stderr at once (a benchmark's log
		// comes only at its end) and in the log.
		start := t.Len()
		for _, k := range keys {
			s := got[k]
			w, wm := spread(s.wall)
			v, vm := spread(s.virtual)
			ratio := "-"
			if wm > 0 && vm > 0 {
				ratio = fmt.Sprintf("%.2f", vm/wm)
			}
			fmt.Fprintf(&t, "| %s | %s | %s | %s | %s | %s | %s |\n", k.file, k.variant, k.flow, k.what, w, v, ratio)
		}
		fmt.Fprint(os.Stderr, t.String()[start:])
	}
	for _, r := range refused {
		fmt.Fprintf(&t, "\nno variant on the virtual clock: %s\n", r)
	}
	b.Logf("%d seeds:%s", seeds, t.String())
}

// spread returns x's min / median / max, formatted, and its median.
func spread(x []float64) (string, float64) {
	if len(x) == 0 {
		return "-", 0
	}
	lo, med, hi := minMedMax(x)
	return fmt.Sprintf("%.3g / %.3g / %.3g", lo, med, hi), med
}

// virtualVariants returns the variants of the scenario in data that the
// virtual clock runs (o sets the clock), to give Parse: nil for all of
// them (or a scenario without variants), else those that parse on their
// own; ok is false when it runs none.
func virtualVariants(file string, data []byte, o scenario.Options) (names []string, ok bool) {
	if _, err := scenario.Parse(file, data, o); err == nil {
		return nil, true
	}
	all, err := scenario.Parse(file, data, scenario.Options{Seed: o.Seed})
	if err != nil {
		return nil, false
	}
	for _, s := range all.Runs {
		one := o
		one.Variants = []string{s.Variant}
		if s.Variant != "" {
			if _, err := scenario.Parse(file, data, one); err == nil {
				names = append(names, s.Variant)
			}
		}
	}
	return names, len(names) > 0
}
