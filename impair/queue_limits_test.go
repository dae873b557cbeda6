package impair

import (
	"testing"
	"time"
)

// TestSetQueueLimit: a smaller queue limit drops the excess at once,
// counted as queue drops, from the tail for drop-tail, CoDel and PIE, from
// the head for head-drop, from the fattest flow for FQ-CoDel; the packet
// on the wire and the kept ones leave as before; a larger limit admits
// more from then on.
func TestSetQueueLimit(t *testing.T) {
	for _, tc := range []struct {
		d    Discipline
		kept []uint32 // ids delivered: 0 was on the wire, 1-9 queued
	}{
		{DropTail, []uint32{0, 1, 2, 3}},
		{HeadDrop, []uint32{0, 7, 8, 9}},
		{CoDel, []uint32{0, 1, 2, 3}},
		{PIE, []uint32{0, 1, 2, 3}},
		{FQCoDel, []uint32{0}}, // one flow: its whole backlog is the fattest
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			// Target and Interval large: no AQM drop in this test.
			cfg := Config{Name: "up", Rate: RateConfig{Bitrate: 1_000_000}, Queue: QueueConfig{Discipline: tc.d, LimitPackets: 100, Target: time.Hour, Interval: time.Hour}}
			c, col, pool := newTestChain(t, cfg)
			for i := range 10 {
				c.Arrive(t0, testPacket(pool, 1000, uint32(i)))
			}
			next := cfg
			next.Queue.LimitPackets = 3
			if err := c.Set(next); err != nil {
				t.Fatal(err)
			}
			if tc.d == FQCoDel {
				// dropFattest drops up to half the flow's backlog per
				// batch, until within the limit: 9 -> 4 (dropped 5) -> 2.
				tc.kept = []uint32{0, 8, 9}
			}
			c.Advance(t0.Add(time.Second))
			var got []uint32
			for _, d := range col.got {
				got = append(got, d.id)
			}
			if len(got) != len(tc.kept) {
				t.Fatalf("delivered %v, want %v", got, tc.kept)
			}
			for i := range got {
				if got[i] != tc.kept[i] {
					t.Fatalf("delivered %v, want %v", got, tc.kept)
				}
			}
			if d := c.Stats().Drops["queue"]; d != uint64(10-len(got)) {
				t.Errorf("%d queue drops, want %d", d, 10-len(got))
			}
			// A larger limit: 5 queued behind one on the wire fit.
			next.Queue.LimitPackets = 5
			if err := c.Set(next); err != nil {
				t.Fatal(err)
			}
			before := c.Stats().Drops["queue"]
			for i := range 6 {
				c.Arrive(t0.Add(time.Second), testPacket(pool, 1000, uint32(20+i)))
			}
			if d := c.Stats().Drops["queue"]; d != before {
				t.Errorf("a limit raised to 5 dropped %d of 5 queued", d-before)
			}
		})
	}
}
