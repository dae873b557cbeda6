package scenario

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
)

// TestNewLinkDefaults: the zero LinkConfig is the scenario of a file
// that sets nothing but its name, links and paths included.
func TestNewLinkDefaults(t *testing.T) {
	s, err := NewLink(LinkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := mustParse(t, "name: link\n")
	if !reflect.DeepEqual(exported(s), exported(want)) || !reflect.DeepEqual(s.Links, want.Links) || !reflect.DeepEqual(s.Paths, want.Paths) {
		t.Errorf("NewLink(LinkConfig{}) =\n%+v\nwant, as parsed,\n%+v", *s, *want)
	}
	if s.Name != DefaultLink || s.SeedSet {
		t.Errorf("name %q, seed set %v: want %q, no seed", s.Name, s.SeedSet, DefaultLink)
	}
}

// TestNewLinkAsParsed makes scenarios of Go values, each direction form
// of TestDirectionForms among them, with the defaults a Go value leaves
// as 0 for impair: each is the scenario the file that NewLink writes for
// it (YAML) parses into, and its directions are the values given (Link,
// or Uplink and Downlink where set) with the file's defaults filled in.
func TestNewLinkAsParsed(t *testing.T) {
	type test struct {
		name     string
		c        LinkConfig
		up, down impair.Config // the directions; zero: c's with defaults
	}
	var tests []test
	for _, f := range directionForms {
		if f.want.Queue.Discipline == impair.PIE && f.want.Queue.MaxBurst == 0 {
			continue // a Go value's MaxBurst 0 is the default, 150ms
		}
		tests = append(tests, test{name: f.uplink, c: LinkConfig{Uplink: &f.want}})
	}
	full := fullDirection()
	fine := impair.Config{ // what a decimal text of each value would round
		Delay: impair.DelayConfig{Time: 1500*time.Microsecond + 1, Jitter: 333},
		Loss:  impair.LossConfig{Model: impair.LossRandom, P: 1.0 / 3},
		Rate:  impair.RateConfig{Bitrate: 1_234_567_891},
	}
	tests = append(tests,
		test{name: "every key", c: LinkConfig{Link: full}},
		test{name: "every key in the uplink", c: LinkConfig{Uplink: &full}},
		test{name: "every key but in the downlink", c: LinkConfig{Link: full, Downlink: &impair.Config{}}},
		test{name: "nanoseconds, a third, a rate of ten digits", c: LinkConfig{Link: fine}},
		test{name: "jitter without delay", c: LinkConfig{Link: impair.Config{Delay: impair.DelayConfig{Jitter: time.Millisecond}}}},
		test{name: "tiny loss, 1bps, 1Tbps", c: LinkConfig{
			Uplink:   &impair.Config{Loss: impair.LossConfig{Model: impair.LossRandom, P: 1e-7}, Rate: impair.RateConfig{Bitrate: 1}},
			Downlink: &impair.Config{Loss: impair.LossConfig{Model: impair.LossRandom, P: 5e-324}, Rate: impair.RateConfig{Bitrate: MaxRate}}}},
		test{name: "zero loss is random loss of 0", c: LinkConfig{Link: impair.Config{Loss: impair.LossConfig{Model: impair.LossRandom}}}},
		test{name: "no loss under a link's loss is random loss of 0", c: LinkConfig{
			Link:   impair.Config{Loss: impair.LossConfig{Model: impair.LossRandom, P: 0.25}, Delay: impair.DelayConfig{Time: time.Millisecond}},
			Uplink: &impair.Config{Delay: impair.DelayConfig{Time: time.Millisecond}}},
			up: with(func(d *impair.Config) {
				d.Delay.Time, d.Loss = time.Millisecond, impair.LossConfig{Model: impair.LossRandom}
			}),
			down: with(func(d *impair.Config) {
				d.Delay.Time, d.Loss = time.Millisecond, impair.LossConfig{Model: impair.LossRandom, P: 0.25}
			})},
		test{name: "a gemodel link, a direction without loss", c: LinkConfig{
			Link:   impair.Config{Loss: impair.LossConfig{Model: impair.LossGE, P: 0.01, R: 0.5, OneMinusH: 1}},
			Uplink: &impair.Config{}}},
		test{name: "fq_codel's quantum follows the mtu", c: LinkConfig{MTU: 9000,
			Link:     impair.Config{Queue: impair.QueueConfig{Discipline: impair.FQCoDel}},
			Downlink: &impair.Config{Queue: impair.QueueConfig{Discipline: impair.FQCoDel, LimitBytes: 9000}}},
			up: impair.Config{Reorder: impair.ReorderConfig{Gap: 1}, InflightLimit: impair.DefaultInflightLimit, Queue: impair.QueueConfig{Discipline: impair.FQCoDel,
				LimitPackets: 1000, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond, Flows: 1024, Quantum: 9014}},
			down: impair.Config{Reorder: impair.ReorderConfig{Gap: 1}, InflightLimit: impair.DefaultInflightLimit, Queue: impair.QueueConfig{Discipline: impair.FQCoDel,
				LimitBytes: 9000, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond, Flows: 1024, Quantum: 9014}}},
		test{name: "a seed, a name", c: LinkConfig{Name: "mine", Seed: 1 << 63, SeedSet: true, Link: impair.Config{Delay: impair.DelayConfig{Time: time.Hour}}}},
		test{name: "a seed of 0", c: LinkConfig{SeedSet: true}},
	)
	for _, tt := range tests {
		s, err := NewLink(tt.c)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		up, down := tt.up, tt.down
		if up == (impair.Config{}) {
			up, down = linkDirection(tt.c.Link, tt.c.Uplink, s.MTU), linkDirection(tt.c.Link, tt.c.Downlink, s.MTU)
		}
		if s.Uplink != up || s.Downlink != down {
			t.Errorf("%s: directions\n%+v\n%+v\nwant\n%+v\n%+v", tt.name, s.Uplink, s.Downlink, up, down)
		}
		y, err := s.YAML()
		if err != nil {
			t.Fatal(err)
		}
		parsed := mustParse(t, string(y))
		if !reflect.DeepEqual(exported(s), exported(parsed)) || !reflect.DeepEqual(s.Links, parsed.Links) || !reflect.DeepEqual(s.Paths, parsed.Paths) {
			t.Errorf("%s: NewLink gives\n%+v\nits YAML parses into\n%+v\nYAML:\n%s", tt.name, exported(s), exported(parsed), y)
		}
	}
}

// linkDirection is a direction of a LinkConfig of link and dir (nil: link's),
// with the defaults of a path of mtu: a direction without loss under
// link's loss has a random loss of 0.
func linkDirection(link impair.Config, dir *impair.Config, mtu int) impair.Config {
	if dir == nil {
		return withDefaults(link, mtu)
	}
	c := withDefaults(*dir, mtu)
	if c.Loss.Model == impair.LossNone && link.Loss.Model != impair.LossNone {
		c.Loss.Model = impair.LossRandom
	}
	return c
}

// TestNewLinkReplaces writes Link's keys under link, and the keys in
// which Uplink or Downlink differ from it under each: so a change of
// link.KEY (netjam ctl, Path.Set) changes the directions that have Link's
// value of KEY, and only them.
func TestNewLinkReplaces(t *testing.T) {
	link := impair.Config{Delay: impair.DelayConfig{Time: 1500 * time.Nanosecond}, Loss: impair.LossConfig{Model: impair.LossRandom, P: 0.25}}
	up := impair.Config{Delay: link.Delay, Rate: impair.RateConfig{Bitrate: 3e6}}
	s, err := NewLink(LinkConfig{Link: link, Uplink: &up})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"link.delay": "1.5µs", "link.loss": "0.25", "link.uplink.loss": "0", "link.uplink.rate": "3Mbps",
		"link.uplink.delay": "", "link.rate": "", "link.downlink": "",
	} {
		if got := s.Value(key); got != want {
			t.Errorf("Value(%s) = %q, want %q", key, got, want)
		}
	}
	y, _ := s.YAML()
	if !strings.HasPrefix(string(y), "# netjam scenario made of Go values (NewLink)") {
		t.Errorf("YAML:\n%s", y)
	}

	n, err := s.With("link.delay=2ms", "link.loss=0.5")
	if err != nil {
		t.Fatal(err)
	}
	if n.Uplink.Delay.Time != 2*time.Millisecond || n.Downlink.Delay.Time != 2*time.Millisecond || n.Uplink.Rate.Bitrate != 3e6 ||
		n.Downlink.Rate.Bitrate != 0 || n.Uplink.Loss.P != 0 || n.Downlink.Loss.P != 0.5 {
		t.Errorf("With: uplink %+v, downlink %+v", n.Uplink, n.Downlink)
	}
	// A change's error names no file: there is none.
	if _, err := s.With("link.delay=2h"); err == nil || err.Error() != "link.delay: 2h is out of range (expected 0s to 1h)" {
		t.Errorf("With a bad value: %v", err)
	}
}

// TestNewLinkErrors gives each value NewLink checks out of its range or
// against another one: each is refused with the message a file's value
// gets (file: the same value in a file, "" when a file cannot write it),
// naming the key it would be at.
func TestNewLinkErrors(t *testing.T) {
	trace := &impair.Trace{Times: []time.Duration{time.Millisecond}}
	delayed := func(f func(c *impair.Config)) func(c *impair.Config) {
		return func(c *impair.Config) { c.Delay.Time = 10 * time.Millisecond; f(c) }
	}
	tests := []struct {
		both func(c *impair.Config) // applied to Link
		lc   LinkConfig             // when both is nil
		want string
		file string
	}{
		{both: func(c *impair.Config) { c.Delay.Time = -5 * time.Millisecond },
			want: "link.delay: -5ms is out of range (expected 0s to 1h)", file: "link: {delay: -5ms}"},
		{both: func(c *impair.Config) { c.Delay.Time = 2 * time.Hour },
			want: "link.delay: 2h is out of range (expected 0s to 1h)", file: "link: {delay: 2h}"},
		{both: delayed(func(c *impair.Config) { c.Delay.Jitter = -time.Millisecond }),
			want: "link.delay.jitter: -1ms is out of range (expected 0s to 1h)", file: "link: {delay: {time: 10ms, jitter: -1ms}}"},
		{both: delayed(func(c *impair.Config) { c.Delay.Distribution = impair.Normal }),
			want: "link.delay.distribution: distribution normal needs a jitter to shape", file: "link: {delay: {time: 10ms, distribution: normal}}"},
		{both: func(c *impair.Config) { c.Delay.Distribution = 9; c.Delay.Jitter = time.Millisecond },
			want: "link.delay.distribution: Distribution(9) is not a distribution (expected one of: uniform, normal, pareto, paretonormal)"},
		{both: delayed(func(c *impair.Config) { c.Delay.Jitter, c.Delay.Correlation = time.Millisecond, 1 }),
			want: "link.delay.correlation: 1 is out of range (expected 0% up to but not including 100%)", file: "link: {delay: {time: 10ms, jitter: 1ms, correlation: 1}}"},
		{both: func(c *impair.Config) { c.Loss = impair.LossConfig{Model: impair.LossRandom, P: 1.5} },
			want: "link.loss: 1.5 is out of range (expected 0% to 100%)", file: "link: {loss: 1.5}"},
		{both: func(c *impair.Config) { c.Loss = impair.LossConfig{Model: impair.LossRandom, P: -0.1} },
			want: "link.loss: -0.1 is out of range (expected 0% to 100%)"},
		{both: func(c *impair.Config) { c.Loss = impair.LossConfig{Model: impair.LossRandom, P: math.NaN()} },
			want: "link.loss: NaN is out of range (expected 0% to 100%)"},
		{both: func(c *impair.Config) { c.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.1, Correlation: 1} },
			want: "link.loss.correlation: 1 is out of range (expected 0% up to but not including 100%)", file: "link: {loss: {p: 0.1, correlation: 1}}"},
		{both: func(c *impair.Config) { c.Loss = impair.LossConfig{Model: impair.LossGE, P: 0.1, R: 2, OneMinusH: 1} },
			want: "link.loss.r: 2 is out of range (expected 0% to 100%)", file: "link: {loss: {model: gemodel, p: 0.1, r: 2}}"},
		{both: func(c *impair.Config) {
			c.Loss = impair.LossConfig{Model: impair.LossState, P13: 0.7, P31: 0.5, P23: 1, P14: 0.4}
		},
			want: "link.loss: p13 + p14 is more than 100% (70% + 40%)", file: "link: {loss: {model: state, p13: 70%, p31: 50%, p14: 40%}}"},
		{both: func(c *impair.Config) { c.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.1, R: 0.5} },
			want: "link.loss.r: applies to model gemodel only (the model is random)", file: "link: {loss: {p: 0.1, r: 0.5}}"},
		{both: func(c *impair.Config) { c.Loss = impair.LossConfig{P: 0.1} },
			want: "link.loss.p: applies to models random and gemodel only (the model is none)"},
		{both: func(c *impair.Config) { c.Loss = impair.LossConfig{Model: 7} },
			want: "link.loss.model: LossModel(7) is not a loss model (expected one of: none, random, gemodel, state)"},
		{both: func(c *impair.Config) { c.Duplicate.P = 2 },
			want: "link.duplicate: 2 is out of range (expected 0% to 100%)", file: "link: {duplicate: 2}"},
		{both: func(c *impair.Config) { c.Corrupt = impair.Chance{P: 0.1, Correlation: 1} },
			want: "link.corrupt.correlation: 1 is out of range (expected 0% up to but not including 100%)", file: "link: {corrupt: {p: 0.1, correlation: 1}}"},
		{both: delayed(func(c *impair.Config) { c.Reorder = impair.ReorderConfig{P: 0.1, Gap: -1} }),
			want: "link.reorder.gap: -1 is out of range (expected 1 to 1048576)", file: "link: {delay: 10ms, reorder: {p: 0.1, gap: -1}}"},
		{both: func(c *impair.Config) { c.Reorder.P = 0.1 },
			want: "link.reorder: reorder needs a delay in this direction to reorder against", file: "link: {reorder: 0.1}"},
		{both: func(c *impair.Config) { c.Rate.Bitrate = 2 * MaxRate },
			want: "link.rate: 2Tbps is more than the maximum rate, 1Tbps"},
		{both: func(c *impair.Config) { c.Rate.Trace = trace },
			want: "link.rate.trace: a trace is a scenario file's (rate: {trace: FILE}): give a bitrate"},
		{both: func(c *impair.Config) { c.Rate = impair.RateConfig{Bitrate: 1e6, PacketOverhead: 2000} },
			want: "link.rate.packet_overhead: 2000 is out of range (expected -1500 to 1500)", file: "link: {rate: {bitrate: 1Mbps, packet_overhead: 2000}}"},
		{both: func(c *impair.Config) { c.Rate = impair.RateConfig{Bitrate: 1e6, CellSize: -1} },
			want: "link.rate.cell_size: -1 is out of range (expected 0 to 65535)", file: "link: {rate: {bitrate: 1Mbps, cell_size: -1}}"},
		{both: func(c *impair.Config) { c.Rate = impair.RateConfig{Bitrate: 1e6, CellOverhead: 5} },
			want: "link.rate.cell_overhead: needs a cell_size (cells are what the overhead is added to)", file: "link: {rate: {bitrate: 1Mbps, cell_overhead: 5}}"},
		{both: func(c *impair.Config) {
			c.Slot = impair.SlotConfig{Min: 5 * time.Millisecond, Max: 2 * time.Millisecond}
		},
			want: "link.slot.max: 2ms is less than min 5ms", file: "link: {slot: {min: 5ms, max: 2ms}}"},
		{both: func(c *impair.Config) { c.Slot = impair.SlotConfig{Packets: 5} },
			want: "link.slot: packets and bytes need slots: set min or max", file: "link: {slot: {packets: 5}}"},
		{both: func(c *impair.Config) { c.Slot = impair.SlotConfig{Min: -time.Millisecond, Max: -time.Millisecond} },
			want: "link.slot: -1ms is out of range (expected 0s to 1h)", file: "link: {slot: -1ms}"},
		{both: func(c *impair.Config) {
			c.Slot = impair.SlotConfig{Min: time.Millisecond, Max: time.Millisecond, Bytes: 2 << 30}
		},
			want: "link.slot.bytes: 2147483648B is out of range (expected 0B to 1073741824B)", file: "link: {slot: {min: 1ms, bytes: 2147483648B}}"},
		{both: func(c *impair.Config) { c.Queue.LimitPackets = -5 },
			want: "link.queue: -5 is out of range (expected 1 to 1048576)", file: "link: {queue: -5}"},
		{both: func(c *impair.Config) { c.Queue.LimitPackets = 2 << 20 },
			want: "link.queue: 2097152 is out of range (expected 1 to 1048576)", file: "link: {queue: 2097152}"},
		{both: func(c *impair.Config) { c.Queue.LimitBytes = 1000 },
			want: "link.queue: 1000B is less than the MTU (1500 bytes), so a full-size packet could never be queued", file: "link: {queue: 1000B}"},
		{both: func(c *impair.Config) { c.Queue.Discipline = 9 },
			want: "link.queue.discipline: Discipline(9) is not a queue discipline (expected one of: droptail, headdrop, codel, fq_codel, pie)"},
		{both: func(c *impair.Config) { c.Queue.Target = 5 * time.Millisecond },
			want: "link.queue.target: applies to codel, fq_codel and pie only (the discipline is droptail)", file: "link: {queue: {target: 5ms}}"},
		{both: func(c *impair.Config) { c.Queue.ECN = true },
			want: "link.queue.ecn: applies to codel, fq_codel and pie only (the discipline is droptail)", file: "link: {queue: {ecn: true}}"},
		{both: func(c *impair.Config) {
			c.Queue = impair.QueueConfig{Discipline: impair.CoDel, Target: -time.Millisecond}
		},
			want: "link.queue.target: -1ms is out of range (expected more than 0s, up to 1h)", file: "link: {queue: {discipline: codel, target: -1ms}}"},
		{both: func(c *impair.Config) { c.Queue = impair.QueueConfig{Discipline: impair.FQCoDel, Flows: 70000} },
			want: "link.queue.flows: 70000 is out of range (expected 1 to 65536)", file: "link: {queue: {discipline: fq_codel, flows: 70000}}"},
		{both: func(c *impair.Config) { c.Queue = impair.QueueConfig{Discipline: impair.PIE, Alpha: 40} },
			want: "link.queue.alpha: 40 is out of range (expected 0 to 32)", file: "link: {queue: {discipline: pie, alpha: 40}}"},
		{both: func(c *impair.Config) { c.InflightLimit = -1 },
			want: "link.inflight_limit: -1 is out of range (expected 1 to 1048576)", file: "link: {inflight_limit: -1}"},
		{lc: LinkConfig{Uplink: &impair.Config{Name: "up"}},
			want: "link.uplink: Name is the emulator's to set, not a scenario's: leave it zero"},
		{lc: LinkConfig{Downlink: &impair.Config{Seed: 1}},
			want: "link.downlink: Seed is the emulator's to set, not a scenario's: leave it zero"},
		{lc: LinkConfig{MTU: 100},
			want: "mtu: 100 is out of range (expected 576 to 65535)", file: "mtu: 100"},
		{lc: LinkConfig{Name: "a b"},
			want: `name: "a b" is not a valid name (use letters, digits, '.', '_' and '-')`, file: "name: a b"},
		{lc: LinkConfig{Uplink: &impair.Config{Loss: impair.LossConfig{Model: impair.LossRandom, P: 1.5}}},
			want: "link.uplink.loss: 1.5 is out of range (expected 0% to 100%)", file: "link: {uplink: {loss: 1.5}}"},
		{lc: LinkConfig{Link: impair.Config{Delay: impair.DelayConfig{Time: time.Millisecond}, Reorder: impair.ReorderConfig{P: 0.1}},
			Uplink: &impair.Config{Reorder: impair.ReorderConfig{P: 0.1}}},
			want: "link.uplink.reorder: reorder needs a delay in this direction to reorder against"},
		// A value Uplink has from Link is Link's problem only.
		{lc: LinkConfig{Link: impair.Config{Queue: impair.QueueConfig{LimitPackets: -1}}, Uplink: &impair.Config{Queue: impair.QueueConfig{LimitPackets: -1}}},
			want: "link.queue: -1 is out of range (expected 1 to 1048576)", file: "link: {queue: -1}"},
		{lc: LinkConfig{Uplink: &impair.Config{Reorder: impair.ReorderConfig{P: 0.1}}},
			want: "link.uplink.reorder: reorder needs a delay in this direction to reorder against", file: "link: {uplink: {reorder: 0.1}}"},
	}
	fileLine := regexp.MustCompile(`^x\.yaml:[0-9]+: `)
	for _, tt := range tests {
		c := tt.lc
		if tt.both != nil {
			tt.both(&c.Link)
		}
		_, err := NewLink(c)
		var es Errors
		if !errors.As(err, &es) || err.Error() != tt.want {
			t.Errorf("NewLink(%+v):\n%v\nwant\n%s", c, err, tt.want)
		}
		if tt.file == "" {
			continue
		}
		_, err = parse(tt.file)
		if err == nil || fileLine.ReplaceAllString(err.Error(), "") != tt.want {
			t.Errorf("the same in a file, %s:\n%v\nwant\n%s", tt.file, err, tt.want)
		}
	}

	// Every problem at once.
	_, err := NewLink(LinkConfig{MTU: 1, Uplink: &impair.Config{Delay: impair.DelayConfig{Time: -1}}, Downlink: &impair.Config{InflightLimit: -1}})
	want := "mtu: 1 is out of range (expected 576 to 65535)\nlink.uplink.delay: -1ns is out of range (expected 0s to 1h)\nlink.downlink.inflight_limit: -1 is out of range (expected 1 to 1048576)"
	if err == nil || err.Error() != want {
		t.Errorf("three problems:\n%v\nwant\n%s", err, want)
	}
}

// TestNewLinkRandom makes scenarios of random directions, of values in
// range and out of it: what NewLink takes, the file it writes is read
// into (a check NewLink lacked would let through a value the decoder
// refuses), and impair validates.
func TestNewLinkRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(vs ...float64) float64 { return vs[rng.IntN(len(vs))] }
	// Values mostly in range, now and then out of it.
	dur := func() time.Duration { return time.Duration(pick(0, 1, 1500, 5e6, 3.6e12, 5e6, 1e9, 3.7e12, -1)) }
	ratio := func() float64 { return pick(0, 1e-9, 0.25, 1.0/3, 0.01, 0.5, 1, 1.5, -0.5) }
	count := func(hi int) int { return int(pick(1, 7, 100, float64(hi), 1, 7, 0, float64(hi+1), -1)) }
	some := func() bool { return rng.IntN(3) == 0 }
	loss := func() impair.LossConfig {
		v := impair.LossConfig{Model: impair.LossModel(rng.IntN(5))}
		switch v.Model {
		case impair.LossRandom:
			v.P = ratio()
			if some() {
				v.Correlation = ratio()
			}
		case impair.LossGE:
			v.P, v.R, v.OneMinusH, v.OneMinusK = ratio(), ratio(), ratio(), ratio()
		case impair.LossState:
			v.P13, v.P31, v.P32, v.P23, v.P14 = ratio()/2, ratio()/2, ratio()/2, ratio(), ratio()/2
		}
		if some() && some() {
			v.R = ratio() // of gemodel only
		}
		return v
	}
	queue := func() impair.QueueConfig {
		q := impair.QueueConfig{Discipline: impair.Discipline(rng.IntN(6))}
		if some() {
			q.LimitPackets = count(maxPackets)
		}
		if some() {
			q.LimitBytes = int64(count(maxBytes)) * 1000
		}
		switch q.Discipline {
		case impair.CoDel, impair.FQCoDel:
			q.ECN, q.Target, q.Interval = some(), dur(), dur()
			if q.Discipline == impair.FQCoDel {
				q.Flows, q.Quantum = count(65536), count(maxPackets)
			}
		case impair.PIE:
			q.ECN, q.Target, q.TUpdate, q.MaxBurst, q.Alpha, q.Beta = some(), dur(), dur(), dur(), pick(0, 0.5, 2, 33), pick(0, 2, -1)
		default:
			if some() && some() {
				q.Target = dur() // of the AQMs only
			}
		}
		return q
	}
	direction := func() impair.Config {
		d := impair.Config{
			Delay:         impair.DelayConfig{Time: dur()},
			Loss:          loss(),
			Duplicate:     impair.Chance{P: ratio()},
			Corrupt:       impair.Chance{P: ratio()},
			Reorder:       impair.ReorderConfig{P: ratio()},
			Rate:          impair.RateConfig{Bitrate: uint64(pick(1, 10e6, 1e9, MaxRate, MaxRate+1))},
			Slot:          impair.SlotConfig{Min: dur(), Max: dur()},
			Queue:         queue(),
			InflightLimit: count(maxPackets),
		}
		if some() {
			d.Delay.Jitter, d.Delay.Distribution, d.Delay.Correlation, d.Delay.AllowReorder = dur(), impair.Distribution(rng.IntN(5)), ratio(), some()
		}
		if some() {
			d.Duplicate.Correlation, d.Reorder.Correlation, d.Reorder.Gap = ratio(), ratio(), count(maxPackets)
		}
		if some() {
			d.Rate.PacketOverhead, d.Rate.CellSize, d.Rate.CellOverhead = int(pick(-20, 14, 2000)), count(65535), count(1500)
		}
		if some() {
			d.Slot.Packets, d.Slot.Bytes = count(maxPackets), int64(count(maxBytes))
		}
		return d
	}
	// Most keys left out, some of them set: a direction with every key
	// set is all but never valid.
	sparse := func() impair.Config {
		d, c := direction(), impair.Config{}
		for range 3 {
			switch rng.IntN(9) {
			case 0:
				c.Delay = d.Delay
			case 1:
				c.Loss = d.Loss
			case 2:
				c.Duplicate = d.Duplicate
			case 3:
				c.Corrupt = d.Corrupt
			case 4:
				c.Reorder = d.Reorder
			case 5:
				c.Rate = d.Rate
			case 6:
				c.Slot = d.Slot
			case 7:
				c.Queue = d.Queue
			case 8:
				c.InflightLimit = d.InflightLimit
			}
		}
		return c
	}
	valid := 0
	for range 10000 {
		c := LinkConfig{Link: sparse(), MTU: int(pick(0, 0, 1500, 9000, 100))}
		if rng.IntN(2) == 0 {
			up := sparse()
			c.Uplink = &up
		}
		s, err := NewLink(c)
		if err != nil {
			continue
		}
		valid++
		y, err := s.YAML()
		if err != nil {
			t.Fatal(err)
		}
		p, err := parse(string(y))
		if err != nil {
			t.Fatalf("NewLink(%+v) took it; its file is refused:\n%v\n%s", c, err, y)
		}
		if got := p.Runs[0]; !reflect.DeepEqual(exported(s), exported(got)) {
			t.Fatalf("NewLink(%+v) =\n%+v\nits file =\n%+v\n%s", c, exported(s), exported(got), y)
		}
		for _, d := range []impair.Config{s.Uplink, s.Downlink} {
			if err := d.Validate(); err != nil {
				t.Fatalf("NewLink(%+v): %v", c, err)
			}
		}
	}
	if valid < 500 {
		t.Errorf("%d of 10000 valid: the values miss the valid ones", valid)
	}
}
