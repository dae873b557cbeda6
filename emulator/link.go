package emulator

import (
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
)

// directionConfig turns a validated scenario direction into the runtime
// configuration of an impair chain. Scenario validation has already checked
// every value, so the conversions cannot fail except on a value scenario
// and impair disagree on, which is a bug reported as an error.
func directionConfig(name string, seed uint64, d scenario.Direction) (impair.Config, error) {
	cfg := impair.Config{
		Name:          name,
		Seed:          seed,
		Duplicate:     impair.Chance{P: d.Duplicate.P, Correlation: d.Duplicate.Correlation},
		Corrupt:       impair.Chance{P: d.Corrupt.P, Correlation: d.Corrupt.Correlation},
		Reorder:       impair.ReorderConfig{P: d.Reorder.P, Correlation: d.Reorder.Correlation, Gap: d.Reorder.Gap},
		Rate:          impair.RateConfig{Bitrate: d.Rate.Bitrate, Trace: d.Rate.Trace, PacketOverhead: d.Rate.PacketOverhead, CellSize: d.Rate.CellSize, CellOverhead: d.Rate.CellOverhead},
		Slot:          impair.SlotConfig{Min: d.Slot.Min, Max: d.Slot.Max, Packets: d.Slot.Packets, Bytes: d.Slot.Bytes},
		InflightLimit: d.InflightLimit,
		Delay: impair.DelayConfig{
			Time:         d.Delay.Time,
			Jitter:       d.Delay.Jitter,
			Correlation:  d.Delay.Correlation,
			AllowReorder: d.Delay.AllowReorder,
		},
		Loss: impair.LossConfig{
			P: d.Loss.P, Correlation: d.Loss.Correlation,
			R: d.Loss.R, OneMinusH: d.Loss.OneMinusH, OneMinusK: d.Loss.OneMinusK,
			P13: d.Loss.P13, P31: d.Loss.P31, P32: d.Loss.P32, P23: d.Loss.P23, P14: d.Loss.P14,
		},
		Queue: impair.QueueConfig{
			LimitPackets: d.Queue.LimitPackets,
			LimitBytes:   d.Queue.LimitBytes,
			ECN:          d.Queue.ECN,
			Target:       d.Queue.Target,
			Interval:     d.Queue.Interval,
			Flows:        d.Queue.Flows,
			Quantum:      d.Queue.Quantum,
			TUpdate:      d.Queue.TUpdate,
			Alpha:        d.Queue.Alpha,
			Beta:         d.Queue.Beta,
			MaxBurst:     d.Queue.MaxBurst,
		},
	}
	switch d.Loss.Model {
	case "":
		cfg.Loss.Model = impair.LossNone
	case "random":
		cfg.Loss.Model = impair.LossRandom
	case "gemodel":
		cfg.Loss.Model = impair.LossGE
	case "state":
		cfg.Loss.Model = impair.LossState
	default:
		return cfg, &mismatchError{"loss model", d.Loss.Model}
	}
	if d.Delay.Distribution != "" {
		dist, err := impair.ParseDistribution(d.Delay.Distribution)
		if err != nil {
			return cfg, err
		}
		cfg.Delay.Distribution = dist
	}
	if d.Queue.Discipline != "" {
		disc, err := impair.ParseDiscipline(d.Queue.Discipline)
		if err != nil {
			return cfg, err
		}
		cfg.Queue.Discipline = disc
	}
	return cfg, cfg.Validate()
}

type mismatchError struct{ what, value string }

func (e *mismatchError) Error() string {
	return "emulator: scenario gave an unknown " + e.what + " " + e.value + " (a bug: validation should have refused it)"
}
