package impair

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

// segOut is one segment leaving a chain under test: a GSO packet that
// left whole counts as its segments, each at the packet's time.
type segOut struct {
	at   time.Time
	data []byte
}

// segCollector records, segment by segment, what a chain delivers.
type segCollector struct {
	got  []segOut
	pool *Pool
}

func (s *segCollector) deliver(now time.Time, p *Packet) {
	s.pool.Split(p, func(q *Packet) {
		s.got = append(s.got, segOut{at: now, data: bytes.Clone(q.Data)})
		q.Release()
	})
}

// wholeWorkload is a stream of GSO packets of 1 to 44 segments of one
// connection, over IPv4 or IPv6, partial or final checksums, arriving in
// bursts faster than a 10 Gbit/s link drains them, then pausing.
type wholeArrival struct {
	at      time.Time
	data    []byte
	mss     int
	partial bool
}

func wholeWorkload(seed uint64, n int, v6, partial bool) []wholeArrival {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []wholeArrival
	now := t0
	seq := uint32(1)
	for i := range n {
		mss := 1448
		if v6 {
			mss = 1428
		}
		segs := 1 + rng.IntN(44)
		payload := segs * mss
		if rng.IntN(3) == 0 {
			payload -= rng.IntN(mss - 1) // a short last segment
		}
		b := superSegment(v6, payload)
		ipLen := 20
		if v6 {
			ipLen = 40
		}
		binary.BigEndian.PutUint32(b[ipLen+4:], seq)
		seq += uint32(payload)
		if !v6 {
			binary.BigEndian.PutUint16(b[4:], uint16(i*50))
		}
		if partial {
			PseudoChecksum(b)
		} else {
			CompleteChecksum(b)
		}
		out = append(out, wholeArrival{at: now, data: b, mss: mss, partial: partial})
		if rng.IntN(8) == 0 {
			now = now.Add(time.Duration(rng.IntN(2000)) * time.Microsecond)
		} else {
			now = now.Add(time.Duration(rng.IntN(20)) * time.Microsecond)
		}
	}
	return out
}

// TestWholeGSOMatchesSegments: a direction that takes GSO packets whole
// (Config.TakesSegments) decides on their segments as one that gets the
// same segments one by one: the same segments leave, byte for byte, in
// the same order; the same are lost or dropped at the queue, for the
// same reasons; the stages count the same packets and bytes, the same
// sojourns and the same busy time. Each segment leaves no earlier than
// it would one by one, and at most clock.Slack later.
func TestWholeGSOMatchesSegments(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"loss", Config{Loss: LossConfig{Model: LossRandom, P: 0.02}}},
		{"correlated loss", Config{Loss: LossConfig{Model: LossRandom, P: 0.05, Correlation: 0.5}}},
		{"gemodel", Config{Loss: LossConfig{Model: LossGE, P: 0.01, R: 0.3, OneMinusH: 0.5, OneMinusK: 0.001}}},
		{"4-state", Config{Loss: LossConfig{Model: LossState, P13: 0.01, P31: 0.5, P32: 0.1, P23: 0.2, P14: 0.005}}},
		{"rate", Config{Rate: RateConfig{Bitrate: 10e9}}},
		{"rate, short queue", Config{Rate: RateConfig{Bitrate: 10e9}, Queue: QueueConfig{LimitPackets: 30}}},
		{"rate, byte limit", Config{Rate: RateConfig{Bitrate: 3e9}, Queue: QueueConfig{LimitBytes: 40000}}},
		{"rate, overhead and cells", Config{Rate: RateConfig{Bitrate: 25e9, PacketOverhead: 24, CellSize: 48, CellOverhead: 5}, Queue: QueueConfig{LimitPackets: 100}}},
		{"the issue's path", Config{Loss: LossConfig{Model: LossRandom, P: 0.01}, Rate: RateConfig{Bitrate: 10e9}, Queue: QueueConfig{LimitPackets: 60}, Delay: DelayConfig{Time: time.Millisecond}}},
	} {
		for _, form := range []struct{ v6, partial bool }{{false, true}, {true, true}, {false, false}} {
			t.Run(fmt.Sprintf("%s/v6=%v,partial=%v", c.name, form.v6, form.partial), func(t *testing.T) {
				cfg := c.cfg
				cfg.Name, cfg.Seed = "up", 7
				if !cfg.TakesSegments() {
					t.Fatalf("%+v does not take segments whole", cfg)
				}
				work := wholeWorkload(3, 400, form.v6, form.partial)
				whole, apart := runWhole(t, cfg, work, false, nil), runWhole(t, cfg, work, true, nil)
				compareWhole(t, whole, apart)
			})
		}
	}
}

// wholeRun is what a chain delivered, and its counters.
type wholeRun struct {
	out    []segOut
	stats  Stats
	stages []StageStats
}

// runWhole runs work through a chain of cfg, its GSO packets whole or
// split before they enter; change, when set, runs before each arrival.
func runWhole(t *testing.T, cfg Config, work []wholeArrival, split bool, change func(c *Chain, i int, at time.Time)) wholeRun {
	t.Helper()
	col := &segCollector{pool: NewPool(2048)}
	c, err := NewChain(cfg, col.deliver)
	if err != nil {
		t.Fatal(err)
	}
	big := NewPool(70000)
	seg := NewPool(2048)
	for i, a := range work {
		if change != nil {
			change(c, i, a.at)
		}
		p := big.Copy(a.data)
		p.SetGSO(a.mss, a.partial)
		if split {
			seg.Split(p, func(s *Packet) { c.Arrive(a.at, s) })
		} else {
			c.Arrive(a.at, p)
		}
	}
	drain(c)
	var st []StageStats
	for _, s := range c.Stages() {
		st = append(st, s.Counters().Snapshot(s.Name()))
	}
	return wholeRun{out: col.got, stats: c.Stats(), stages: st}
}

func compareWhole(t *testing.T, whole, apart wholeRun) {
	t.Helper()
	if len(whole.out) != len(apart.out) {
		t.Fatalf("%d segments left whole, %d apart", len(whole.out), len(apart.out))
	}
	for i := range whole.out {
		w, a := whole.out[i], apart.out[i]
		if !bytes.Equal(w.data, a.data) {
			t.Fatalf("segment %d differs:\nwhole % x\napart % x", i, w.data[:60], a.data[:60])
		}
		if late := w.at.Sub(a.at); late < 0 || late > clock.Slack {
			t.Fatalf("segment %d left %v after its time apart", i, late)
		}
	}
	ws, as := whole.stats, apart.stats
	if ws.InPackets != as.InPackets || ws.OutPackets != as.OutPackets || ws.OutBytes != as.OutBytes || fmt.Sprint(ws.Drops) != fmt.Sprint(as.Drops) {
		t.Errorf("whole: in %d out %d (%d B) drops %v; apart: in %d out %d (%d B) drops %v",
			ws.InPackets, ws.OutPackets, ws.OutBytes, ws.Drops, as.InPackets, as.OutPackets, as.OutBytes, as.Drops)
	}
	for i := range whole.stages {
		w, a := whole.stages[i], apart.stages[i]
		if w.InPackets != a.InPackets || w.OutPackets != a.OutPackets || w.OutBytes != a.OutBytes || fmt.Sprint(w.Drops) != fmt.Sprint(a.Drops) || w.BusyNs != a.BusyNs {
			t.Errorf("stage %s whole %+v\napart %+v", w.Name, w, a)
		}
		if (w.Sojourn == nil) != (a.Sojourn == nil) || w.Sojourn != nil && (w.Sojourn.Count != a.Sojourn.Count || w.Sojourn.Mean != a.Sojourn.Mean) {
			t.Errorf("stage %s sojourns whole %+v, apart %+v", w.Name, w.Sojourn, a.Sojourn)
		}
	}
	if ws.OutPackets == ws.InPackets && len(whole.stages) > 0 && whole.stages[0].Name == "loss" {
		t.Error("nothing was lost: the test shows nothing")
	}
}

// TestWholeGSOLimitsChange: a queue's limits lowered and raised while it
// holds GSO packets, and while a part of one is on the wire, trim and
// admit the same segments as one holding them one by one.
func TestWholeGSOLimitsChange(t *testing.T) {
	cfg := Config{Name: "up", Seed: 1, Rate: RateConfig{Bitrate: 5e9}, Queue: QueueConfig{LimitPackets: 200}}
	change := func(c *Chain, i int, at time.Time) {
		set := cfg
		switch i {
		case 100, 250:
			set.Queue.LimitPackets = 7
		case 150:
			set.Queue.LimitBytes, set.Queue.LimitPackets = 30000, 0
		case 200, 300:
			set.Queue.LimitPackets = 200
		default:
			return
		}
		c.Advance(at)
		if err := c.Set(set); err != nil {
			t.Fatal(err)
		}
	}
	work := wholeWorkload(5, 400, false, true)
	whole, apart := runWhole(t, cfg, work, false, change), runWhole(t, cfg, work, true, change)
	compareWhole(t, whole, apart)
	if whole.stats.Drops["queue"] == 0 {
		t.Error("no queue drops: the test shows nothing")
	}
}

// TestTakesSegments: which directions take GSO packets whole.
func TestTakesSegments(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want bool
	}{
		{Config{}, true},
		{Config{Delay: DelayConfig{Time: time.Millisecond}}, true},
		{Config{Loss: LossConfig{Model: LossGE, P: 0.1, R: 0.5}}, true},
		{Config{Rate: RateConfig{Bitrate: WholeRate}}, true},
		{Config{Rate: RateConfig{Bitrate: WholeRate - 1}}, false},
		{Config{Rate: RateConfig{Bitrate: 10e9}, Queue: QueueConfig{Discipline: HeadDrop}}, false},
		{Config{Rate: RateConfig{Bitrate: 10e9}, Queue: QueueConfig{Discipline: CoDel}}, false},
		{Config{Rate: RateConfig{Trace: &Trace{Times: ms(1)}}}, false},
		{Config{Duplicate: Chance{P: 0.1}}, false},
		{Config{Corrupt: Chance{P: 0.1}}, false},
		{Config{Delay: DelayConfig{Time: time.Millisecond, Jitter: time.Microsecond}}, false},
		{Config{Reorder: ReorderConfig{P: 0.1}, Delay: DelayConfig{Time: time.Millisecond}}, false},
		{Config{Slot: SlotConfig{Min: time.Millisecond, Max: time.Millisecond}}, false},
	} {
		if got := c.cfg.TakesSegments(); got != c.want {
			t.Errorf("%+v: TakesSegments %v, want %v", c.cfg, got, c.want)
		}
	}
	if WholeRate != 2_400_000_000 {
		t.Errorf("WholeRate %d", WholeRate)
	}
}

// TestWholeGSOAllocatesNothing: GSO packets through the path
// (loss, a 10 Gbit/s rate cutting them into parts, a delay) allocate
// nothing in steady state.
func TestWholeGSOAllocatesNothing(t *testing.T) {
	c, err := NewChain(Config{Name: "up", Seed: 1, Loss: LossConfig{Model: LossRandom, P: 1e-6},
		Rate: RateConfig{Bitrate: 10e9}, Delay: DelayConfig{Time: time.Millisecond}}, func(_ time.Time, p *Packet) { p.Release() })
	if err != nil {
		t.Fatal(err)
	}
	big := NewPool(70000)
	b := superSegment(false, 44*1448)
	PseudoChecksum(b)
	now := t0
	step := func() {
		now = now.Add(60 * time.Microsecond) // 8.7 Gbit/s offered
		p := big.Copy(b)
		p.SetGSO(1448, true)
		c.Arrive(now, p)
	}
	for range 2000 {
		step()
	}
	checkPooledNoAllocs(t, 5000, "GSO packet", step)
}

// TestWholeGSOPartsFitTheirBuffers: the parts a 10 Gbit/s rate cuts GSO
// packets into, and GSO packets that go on the wire whole, hold buffers at
// most twice their length, so that what they cost a delay line's bound on
// held memory is near what they carry (a part in its sender's 64 KiB
// buffer cost the bound 64 KiB: a 10 Gbit/s path with 50 ms of delay
// dropped at it).
func TestWholeGSOPartsFitTheirBuffers(t *testing.T) {
	worst := 0.0
	c, err := NewChain(Config{Name: "up", Rate: RateConfig{Bitrate: 10e9}, Delay: DelayConfig{Time: 50 * time.Millisecond}}, func(_ time.Time, p *Packet) {
		worst = max(worst, float64(p.mem())/float64(len(p.Data)))
		p.Release()
	})
	if err != nil {
		t.Fatal(err)
	}
	big := NewPool(70000)
	now := t0
	for i := range 20000 {
		segs := 2 + i%43
		b := superSegment(false, segs*1448)
		PseudoChecksum(b)
		p := big.Copy(b)
		p.SetGSO(1448, true)
		c.Arrive(now, p)
		now = now.Add(time.Duration(segs*1500*8*100/90) * time.Nanosecond) // 9 Gbit/s
	}
	drain(c)
	st := c.Stats()
	if worst > 2 {
		t.Errorf("a packet left in a buffer %.1f times its length", worst)
	}
	if n := st.Drops[DropInflight.String()]; n > 0 {
		t.Errorf("%d segments dropped at the delay line's memory bound", n)
	}
}
