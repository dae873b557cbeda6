package wifi

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const us = time.Microsecond

// at returns the instant d after clock.Epoch, where test media start.
func at(d time.Duration) time.Time { return clock.Epoch.Add(d) }

// delivery is one packet a test medium delivered.
type delivery struct {
	at       time.Duration // since clock.Epoch
	id       uint32
	station  int
	downlink bool
}

// collector keeps what a medium delivers and releases the packets.
type collector struct{ got []delivery }

func (c *collector) up(now time.Time, p *impair.Packet, station int) {
	c.got = append(c.got, delivery{now.Sub(clock.Epoch), binary.BigEndian.Uint32(p.Data), station, false})
	p.Release()
}

func (c *collector) down(now time.Time, p *impair.Packet, station int) {
	c.got = append(c.got, delivery{now.Sub(clock.Epoch), binary.BigEndian.Uint32(p.Data), station, true})
	p.Release()
}

var pool = impair.NewPool(2048)

// pkt returns an n-byte packet carrying id in its first bytes.
func pkt(n int, id uint32) *impair.Packet {
	p := pool.Get(n)
	clear(p.Data)
	binary.BigEndian.PutUint32(p.Data, id)
	return p
}

// newTestMedium builds a medium for cfg and starts its time at
// clock.Epoch.
func newTestMedium(t testing.TB, cfg Config) (*Medium, *collector) {
	t.Helper()
	col := &collector{}
	m, err := NewMedium(cfg, col.up, col.down)
	if err != nil {
		t.Fatal(err)
	}
	m.Advance(clock.Epoch)
	return m, col
}

// script replaces a medium's backoff draws: contender i draws its values
// in order (0 once they run out), and every draw is logged with the
// contention window it was drawn from.
type script struct {
	draws map[int][]int
	log   []draw
}

type draw struct{ station, cw, value int }

func (s *script) hook(station, cw int) int {
	v := 0
	if d := s.draws[station]; len(d) > 0 {
		v, s.draws[station] = d[0], d[1:]
	}
	s.log = append(s.log, draw{station, cw, v})
	return v
}

// stations returns n default stations.
func stations(n int) []StationConfig { return make([]StationConfig, n) }

// run advances m to d past the epoch.
func run(m *Medium, d time.Duration) { m.Advance(at(d)) }

// wantDeliveries compares deliveries with want, exactly.
func wantDeliveries(t *testing.T, got, want []delivery) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d deliveries %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delivery %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
