package netjam_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam"
)

// TestLinkErrors gives each field of a Link a value out of its range:
// each is refused with a message that names the field, and what its
// range is as a scenario file's message says it.
func TestLinkErrors(t *testing.T) {
	for _, c := range []struct {
		l    netjam.Link
		want string
	}{
		{netjam.Link{Delay: -5 * time.Millisecond}, "Link.Delay: -5ms is out of range (expected 0s to 1h)"},
		{netjam.Link{Delay: 2 * time.Hour}, "Link.Delay: 2h is out of range (expected 0s to 1h)"},
		{netjam.Link{Jitter: -time.Millisecond}, "Link.Jitter: -1ms is out of range (expected 0s to 1h)"},
		{netjam.Link{Delay: time.Millisecond, Jitter: 61 * time.Minute}, "Link.Jitter: 1h1m is out of range (expected 0s to 1h)"},
		{netjam.Link{Loss: 1.5}, "Link.Loss: 1.5 is out of range (expected 0% to 100%)"},
		{netjam.Link{Loss: -0.1}, "Link.Loss: -0.1 is out of range (expected 0% to 100%)"},
		{netjam.Link{Loss: math.NaN()}, "Link.Loss: NaN is out of range (expected 0% to 100%)"},
		{netjam.Link{Rate: -1}, "Link.Rate: -1 is not a rate in bits per second (0: unlimited)"},
		{netjam.Link{Rate: math.NaN()}, "Link.Rate: NaN is not a rate in bits per second (0: unlimited)"},
		{netjam.Link{Rate: 10.5}, "Link.Rate: 10.5 is not a whole number of bits per second"},
		{netjam.Link{Rate: 2e12}, "Link.Rate: 2e+12 is more than the maximum rate, 1Tbps"},
		{netjam.Link{Rate: 1e20}, "Link.Rate: 1e+20 is more than the maximum rate, 1Tbps"},
		{netjam.Link{Rate: math.Inf(1)}, "Link.Rate: +Inf is more than the maximum rate, 1Tbps"},
		{netjam.Link{Queue: -5}, "Link.Queue: -5 is out of range (expected 1 to 1048576)"},
		{netjam.Link{Queue: 2 << 20}, "Link.Queue: 2097152 is out of range (expected 1 to 1048576)"},
		{netjam.Link{MTU: 100}, "Link.MTU: 100 is out of range (expected 576 to 65535)"},
		{netjam.Link{MTU: -1}, "Link.MTU: -1 is out of range (expected 576 to 65535)"},
		{netjam.Link{Up: &netjam.Direction{Loss: 2}}, "Link.Up.Loss: 2 is out of range (expected 0% to 100%)"},
		{netjam.Link{Down: &netjam.Direction{Delay: -1}}, "Link.Down.Delay: -1ns is out of range (expected 0s to 1h)"},
		{netjam.Link{Down: &netjam.Direction{Rate: 0.5}}, "Link.Down.Rate: 0.5 is not a whole number of bits per second"},
		{netjam.Link{Up: &netjam.Direction{Jitter: -1, Queue: -1}},
			"Link.Up.Jitter: -1ns is out of range (expected 0s to 1h)\nLink.Up.Queue: -1 is out of range (expected 1 to 1048576)"},
		// Checked though Up and Down replace it.
		{netjam.Link{Loss: 2, Up: &netjam.Direction{}, Down: &netjam.Direction{}}, "Link.Loss: 2 is out of range (expected 0% to 100%)"},
		// Every problem at once.
		{netjam.Link{MTU: 1, Loss: 2, Up: &netjam.Direction{Rate: 0.5, Delay: -1}},
			"Link.MTU: 1 is out of range (expected 576 to 65535)\nLink.Loss: 2 is out of range (expected 0% to 100%)\n" +
				"Link.Up.Delay: -1ns is out of range (expected 0s to 1h)\nLink.Up.Rate: 0.5 is not a whole number of bits per second"},
	} {
		p, err := netjam.Start(context.Background(), c.l)
		if err == nil {
			p.Close()
		}
		if want := "netjam: " + c.want; err == nil || err.Error() != want {
			t.Errorf("Start(%+v):\n%v\nwant\n%s", c.l, err, want)
		}
	}
}

// TestLinkUpReplaces: Up and Down replace the Link's fields for their
// direction as a whole, as Link's doc says: a field Up leaves 0 is 0 on
// the uplink, not the Link's. A change of a Link's key (Set("loss"))
// changes the directions that have the Link's value of the key, and a
// direction's key (uplink.rate) its own: here the uplink's delay, with
// its jitter, and its loss, none, are its own.
func TestLinkUpReplaces(t *testing.T) {
	p, err := netjam.Start(context.Background(), netjam.Link{
		Delay: 10 * time.Millisecond, Loss: 0.5, Rate: 5e6,
		Up:   &netjam.Direction{Delay: 10 * time.Millisecond, Jitter: time.Millisecond},
		Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st := p.Stats()
	if up, down := st.Uplink.Configured, st.Downlink.Configured; up.DelayMs != 10 || up.JitterMs != 1 || up.LossRatio != 0 || up.RateBps != 0 ||
		down.DelayMs != 10 || down.JitterMs != 0 || down.LossRatio != 0.5 || down.RateBps != 5e6 {
		t.Errorf("uplink %+v\ndownlink %+v\nwant the uplink of Up alone, the downlink of the Link", up, down)
	}
	for _, kv := range [][2]string{{"loss", "10%"}, {"delay", "20ms"}, {"uplink.rate", "1Mbps"}} {
		if err := p.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	st = p.Stats()
	if up, down := st.Uplink.Configured, st.Downlink.Configured; up.DelayMs != 10 || up.LossRatio != 0 || up.RateBps != 1e6 ||
		down.DelayMs != 20 || down.LossRatio != 0.1 || down.RateBps != 5e6 {
		t.Errorf("after Set: uplink %+v\ndownlink %+v", up, down)
	}
	// Up and Down both with their own delay: the Link's changes nothing,
	// and is refused, saying what to set.
	q, err := netjam.Start(context.Background(), netjam.Link{Up: &netjam.Direction{Delay: time.Millisecond}, Down: &netjam.Direction{Delay: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Set("delay", "5ms"); err == nil || !strings.Contains(err.Error(), "link.delay changes nothing for the uplink and the downlink") || !strings.Contains(err.Error(), "set link.uplink.delay and link.downlink.delay instead") {
		t.Errorf("Set(delay) of a Link whose Up and Down have their own: %v", err)
	}
}

// TestLinkValuesKept: a Link's values reach the path as they are, to
// the nanosecond and the bit per second, and its seed is the path's.
func TestLinkValuesKept(t *testing.T) {
	p, err := netjam.Start(context.Background(), netjam.Link{
		Delay: 1500*time.Microsecond + 1, Jitter: 333, Loss: 1.0 / 3, Rate: 1_234_567_891, Queue: 17, MTU: 9000, Seed: math.MaxUint64,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"delay ms", p.Stats().Uplink.Configured.DelayMs, float64(1500*time.Microsecond+1) / 1e6},
		{"jitter ms", p.Stats().Downlink.Configured.JitterMs, 333.0 / 1e6},
		{"loss", p.Stats().Uplink.Configured.LossRatio, 1.0 / 3},
		{"rate", float64(p.Stats().Downlink.Configured.RateBps), 1_234_567_891},
		{"queue", float64(p.Stats().Uplink.Configured.QueuePackets), 17},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if p.Seed() != math.MaxUint64 {
		t.Errorf("seed %d", p.Seed())
	}
	if err := p.Set("loss", "1%"); err != nil || !strings.Contains(p.Stats().Uplink.Configured.Summary, "loss 1%") || p.Stats().Uplink.Configured.DelayMs != 1.500001 {
		t.Errorf("Set loss: %v, %+v", err, p.Stats().Uplink.Configured)
	}
}
