package scenario

import (
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
)

// TestLinkDecodesIntoImpairConfig decodes every direction key into the
// field of impair.Config it sets: there is no copy between the two.
func TestLinkDecodesIntoImpairConfig(t *testing.T) {
	p, err := parse(`
link:
  delay: {time: 40ms, jitter: 4ms, distribution: pareto, correlation: 10%, allow_reorder: true}
  loss: {model: gemodel, p: 1%, r: 20%, 1-h: 90%, 1-k: 0.1%}
  duplicate: {p: 1%, correlation: 5%}
  corrupt: 0.5%
  reorder: {p: 2%, gap: 3}
  rate: {bitrate: 12Mbps, packet_overhead: 14, cell_size: 48, cell_overhead: 5}
  slot: {min: 1ms, max: 2ms, packets: 8, bytes: 12000}
  queue: {limit: 300, bytes: 400KB, discipline: pie, ecn: true, target: 20ms, tupdate: 30ms, alpha: 0.25, beta: 2, max_burst: 100ms}
  inflight_limit: 5000
`)
	if err != nil {
		t.Fatal(err)
	}
	want := impair.Config{
		Delay:     impair.DelayConfig{Time: 40 * time.Millisecond, Jitter: 4 * time.Millisecond, Distribution: impair.Pareto, Correlation: 0.1, AllowReorder: true},
		Loss:      impair.LossConfig{Model: impair.LossGE, P: 0.01, R: 0.2, OneMinusH: 0.9, OneMinusK: 0.001},
		Duplicate: impair.Chance{P: 0.01, Correlation: 0.05},
		Corrupt:   impair.Chance{P: 0.005},
		Reorder:   impair.ReorderConfig{P: 0.02, Gap: 3},
		Rate:      impair.RateConfig{Bitrate: 12e6, PacketOverhead: 14, CellSize: 48, CellOverhead: 5},
		Slot:      impair.SlotConfig{Min: time.Millisecond, Max: 2 * time.Millisecond, Packets: 8, Bytes: 12000},
		Queue: impair.QueueConfig{Discipline: impair.PIE, LimitPackets: 300, LimitBytes: 400000, ECN: true,
			Target: 20 * time.Millisecond, TUpdate: 30 * time.Millisecond, Alpha: 0.25, Beta: 2, MaxBurst: 100 * time.Millisecond},
		InflightLimit: 5000,
	}
	for _, got := range []impair.Config{p.Runs[0].Uplink, p.Runs[0].Downlink} {
		if got != want {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
		if err := got.Validate(); err != nil {
			t.Error(err)
		}
	}
}
