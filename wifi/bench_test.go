package wifi

import (
	"fmt"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
)

// BenchmarkSaturated simulates n saturated stations (802.11g, 1500-byte
// packets); an op is one frame exchange. frames/s is delivered frames per
// second of CPU, sim-s/s simulated seconds per second of CPU.
func BenchmarkSaturated(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		for _, rts := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/rts=%v", n, rts), func(b *testing.B) {
				cfg := Config{Standard: "802.11g", Stations: make([]StationConfig, n)}
				if rts {
					cfg.RTSThreshold = 1
				}
				for i := range cfg.Stations {
					cfg.Stations[i].Saturate = 1500
				}
				m, _ := newTestMedium(b, cfg)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				d := time.Duration(0)
				for m.exchanges.Load() < uint64(b.N) {
					d += time.Millisecond
					run(m, d)
				}
				cpu := time.Since(start).Seconds()
				var frames uint64
				for i := range m.c {
					frames += m.c[i].delivered.Load()
				}
				b.ReportMetric(float64(frames)/cpu, "frames/s")
				b.ReportMetric(d.Seconds()/cpu, "sim-s/s")
			})
		}
	}
}

// BenchmarkPackets sends real packets through Arrive and Advance: one
// station and the AP exchange a packet each way per op, with a busy
// background station. It allocates nothing once the queues have grown.
func BenchmarkPackets(b *testing.B) {
	m, _ := newTestMedium(b, Config{Standard: "802.11n", Stations: []StationConfig{{}, {Saturate: 1500}}})
	m.up = func(_ time.Time, p *impair.Packet, _ int) { p.Release() }
	m.down = m.up
	b.ReportAllocs()
	b.ResetTimer()
	t := time.Duration(0)
	for i := range b.N {
		t += time.Millisecond
		m.Arrive(at(t), pkt(1500, uint32(i)), 0, false)
		m.Arrive(at(t), pkt(1500, uint32(i)), 0, true)
		for {
			next, ok := m.Next()
			if !ok {
				break
			}
			m.Advance(next)
		}
	}
	b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "packets/s")
}
