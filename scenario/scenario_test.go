package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/capture"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/wifi"
)

// parse parses src as the file x.yaml with the given --set arguments, on
// a kernel that offers testCCs.
func parse(src string, sets ...string) (*Plan, error) {
	return Parse("x.yaml", []byte(src), Options{Sets: sets, CongestionControls: testCCs})
}

// testCCs are the congestion controls of the tests' kernel, whatever the
// machine's.
func testCCs() ([]string, error) { return []string{"reno", "cubic", "bbr"}, nil }

// mustParse parses src and returns its only run.
func mustParse(t *testing.T, src string, sets ...string) *Scenario {
	t.Helper()
	p, err := parse(src, sets...)
	if err != nil {
		t.Fatalf("Parse:\n%v\nsource:\n%s", err, src)
	}
	if len(p.Runs) != 1 {
		t.Fatalf("Parse: %d runs, want 1", len(p.Runs))
	}
	return p.Runs[0]
}

// exported returns s without its unexported fields, for comparisons.
// The link shorthand's Links and Paths (one link of Uplink and Downlink
// on one default path) are left out, as the tests written before links
// expect; TestLinkShorthand checks them.
func exported(s *Scenario) Scenario {
	c := *s
	c.file, c.tree, c.shadowed, c.noEffect, c.traceFiles = "", nil, nil, nil, nil
	if len(c.Links) == 1 && c.Links[0].Name == DefaultLink && c.Links[0].Uplink == c.Uplink && c.Links[0].Downlink == c.Downlink &&
		len(c.Paths) == 1 && c.Paths[0].Name == DefaultPath {
		c.Links, c.Paths = nil, nil
	}
	return c
}

// defaultDirection is a direction with every default and no impairment.
func defaultDirection() impair.Config {
	return impair.Config{
		Reorder:       impair.ReorderConfig{Gap: 1},
		Queue:         impair.QueueConfig{LimitPackets: 1000},
		InflightLimit: 16384,
	}
}

// with returns the default direction changed by f.
func with(f func(d *impair.Config)) impair.Config {
	d := defaultDirection()
	f(&d)
	return d
}

func TestDefaults(t *testing.T) {
	want := Scenario{
		Name:           "x",
		Duration:       30 * time.Second,
		SampleInterval: 100 * time.Millisecond,
		MTU:            1500,
		Uplink:         defaultDirection(),
		Downlink:       defaultDirection(),
	}
	for _, src := range []string{
		"",
		"# only a comment\n",
		"---\n",
		"{}",
		"name: ~\nlink: {}\nflows: []\nvariants: []\n",
		"link:\n  uplink:\n  downlink: ~\nflows:\nvariants:\n",
	} {
		got := mustParse(t, src)
		if !reflect.DeepEqual(exported(got), want) {
			t.Errorf("Parse(%q) =\n%+v\nwant\n%+v", src, exported(got), want)
		}
	}
}

func TestTopLevel(t *testing.T) {
	got := mustParse(t, `
name: tcp-vs-udp.loss_2
description: free text
seed: 18446744073709551615
duration: 1m30s
mtu: 9000
`)
	want := Scenario{
		Name:           "tcp-vs-udp.loss_2",
		Description:    "free text",
		Seed:           18446744073709551615,
		SeedSet:        true,
		Duration:       90 * time.Second,
		SampleInterval: 100 * time.Millisecond,
		MTU:            9000,
		Uplink:         defaultDirection(),
		Downlink:       defaultDirection(),
	}
	if !reflect.DeepEqual(exported(got), want) {
		t.Errorf("got\n%+v\nwant\n%+v", exported(got), want)
	}

	// The name comes from the file name when the file has none, and must
	// then be a valid name too.
	for path, want := range map[string]string{
		"my test.yaml": `my test.yaml: name: not set, and the file name "my test" is not a valid name (use letters, digits, '.', '_' and '-'); set name`,
		"":             `name: not set, and there is no file name to take it from; set name`,
	} {
		if _, err := Parse(path, nil, Options{}); err == nil || err.Error() != want {
			t.Errorf("Parse(%q) error = %v, want %s", path, err, want)
		}
	}
	// The name comes from the file name when the file has none.
	p, err := Parse("configs/wifi-2.4.yaml", nil, Options{})
	if err != nil || p.Name != "wifi-2.4" || p.Runs[0].Name != "wifi-2.4" || p.Path != "configs/wifi-2.4.yaml" {
		t.Errorf("Parse(configs/wifi-2.4.yaml) = %+v, %v; want name wifi-2.4", p, err)
	}
}

// directionForms are forms of a direction's keys and what each decodes
// into (TestDirectionForms); NewLink makes the same of the values
// (TestNewLinkAsParsed).
var directionForms = []struct {
	uplink string
	want   impair.Config
}{
	{`delay: 50ms`, with(func(d *impair.Config) { d.Delay.Time = 50 * time.Millisecond })},
	{`delay: 0`, defaultDirection()},
	{`delay: {time: 50ms, jitter: 5ms, distribution: normal, correlation: 25%, allow_reorder: true}`,
		with(func(d *impair.Config) {
			d.Delay = impair.DelayConfig{Time: 50 * time.Millisecond, Jitter: 5 * time.Millisecond, Distribution: impair.Normal, Correlation: 0.25, AllowReorder: true}
		})},
	{`delay: {jitter: 1ms, distribution: paretonormal}`, with(func(d *impair.Config) {
		d.Delay = impair.DelayConfig{Jitter: time.Millisecond, Distribution: impair.ParetoNormal}
	})},
	{`loss: 5%`, with(func(d *impair.Config) { d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.05} })},
	{`loss: 0.05`, with(func(d *impair.Config) { d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.05} })},
	{`loss: {p: 1%, correlation: 0.5}`, with(func(d *impair.Config) {
		d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.01, Correlation: 0.5}
	})},
	{`loss: {model: random, p: 1%}`, with(func(d *impair.Config) { d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.01} })},
	// netem's gemodel defaults: r = 1-p, 1-h = 100%, 1-k = 0%.
	{`loss: {model: gemodel, p: 10%}`, with(func(d *impair.Config) {
		d.Loss = impair.LossConfig{Model: impair.LossGE, P: 0.1, R: 0.9, OneMinusH: 1}
	})},
	{`loss: {model: gemodel, p: 1%, r: 30%, 1-h: 50%, 1-k: 0.1%}`, with(func(d *impair.Config) {
		d.Loss = impair.LossConfig{Model: impair.LossGE, P: 0.01, R: 0.3, OneMinusH: 0.5, OneMinusK: 0.001}
	})},
	// netem's state defaults: p31 = 1-p13, p32 = 0, p23 = 1, p14 = 0.
	{`loss: {model: state, p13: 10%}`, with(func(d *impair.Config) {
		d.Loss = impair.LossConfig{Model: impair.LossState, P13: 0.1, P31: 0.9, P23: 1}
	})},
	{`loss: {model: state, p13: 70%, p31: 80%, p32: 20%, p23: 90%, p14: 30%}`, with(func(d *impair.Config) {
		d.Loss = impair.LossConfig{Model: impair.LossState, P13: 0.7, P31: 0.8, P32: 0.2, P23: 0.9, P14: 0.3}
	})},
	{`duplicate: 1%`, with(func(d *impair.Config) { d.Duplicate = impair.Chance{P: 0.01} })},
	{`duplicate: {p: 1%, correlation: 10%}`, with(func(d *impair.Config) { d.Duplicate = impair.Chance{P: 0.01, Correlation: 0.1} })},
	{`corrupt: 0.1%`, with(func(d *impair.Config) { d.Corrupt = impair.Chance{P: 0.001} })},
	{`corrupt: {p: 0.1%, correlation: 0}`, with(func(d *impair.Config) { d.Corrupt = impair.Chance{P: 0.001} })},
	{`{delay: 10ms, reorder: 25%}`, with(func(d *impair.Config) {
		d.Delay.Time = 10 * time.Millisecond
		d.Reorder = impair.ReorderConfig{P: 0.25, Gap: 1}
	})},
	{`{delay: 10ms, reorder: {p: 100%, correlation: 50%, gap: 5}}`, with(func(d *impair.Config) {
		d.Delay.Time = 10 * time.Millisecond
		d.Reorder = impair.ReorderConfig{P: 1, Correlation: 0.5, Gap: 5}
	})},
	{`reorder: 0%`, defaultDirection()}, // no reordering needs no delay
	{`rate: 10Mbps`, with(func(d *impair.Config) { d.Rate.Bitrate = 10_000_000 })},
	{`rate: unlimited`, defaultDirection()},
	{`rate: {bitrate: 1Mbps, packet_overhead: -20, cell_size: 48, cell_overhead: 5}`, with(func(d *impair.Config) {
		d.Rate = impair.RateConfig{Bitrate: 1_000_000, PacketOverhead: -20, CellSize: 48, CellOverhead: 5}
	})},
	{`slot: 4ms`, with(func(d *impair.Config) {
		d.Slot = impair.SlotConfig{Min: 4 * time.Millisecond, Max: 4 * time.Millisecond}
	})},
	{`slot: 0`, defaultDirection()},
	{`slot: {min: 2ms}`, with(func(d *impair.Config) {
		d.Slot = impair.SlotConfig{Min: 2 * time.Millisecond, Max: 2 * time.Millisecond}
	})},
	{`slot: {max: 2ms}`, with(func(d *impair.Config) { d.Slot = impair.SlotConfig{Max: 2 * time.Millisecond} })},
	{`slot: {min: 2ms, max: 6ms, packets: 32, bytes: 64KiB}`, with(func(d *impair.Config) {
		d.Slot = impair.SlotConfig{Min: 2 * time.Millisecond, Max: 6 * time.Millisecond, Packets: 32, Bytes: 65536}
	})},
	{`slot: {min: 2ms, bytes: 3000}`, with(func(d *impair.Config) {
		d.Slot = impair.SlotConfig{Min: 2 * time.Millisecond, Max: 2 * time.Millisecond, Bytes: 3000}
	})},
	{`queue: 50`, with(func(d *impair.Config) { d.Queue.LimitPackets = 50 })},
	{`queue: 1.5MB`, with(func(d *impair.Config) { d.Queue = impair.QueueConfig{LimitBytes: 1_500_000} })},
	{`queue: {bytes: 64KiB}`, with(func(d *impair.Config) { d.Queue = impair.QueueConfig{LimitBytes: 65536} })},
	{`queue: {bytes: 1500}`, with(func(d *impair.Config) { d.Queue = impair.QueueConfig{LimitBytes: 1500} })},
	{`queue: {limit: 100, bytes: 1MB, discipline: headdrop}`, with(func(d *impair.Config) {
		d.Queue = impair.QueueConfig{Discipline: impair.HeadDrop, LimitPackets: 100, LimitBytes: 1_000_000}
	})},
	{`queue: {discipline: codel}`, with(func(d *impair.Config) {
		d.Queue = impair.QueueConfig{Discipline: impair.CoDel, LimitPackets: 1000, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond}
	})},
	{`queue: {discipline: codel, ecn: true, target: 10ms, interval: 200ms}`, with(func(d *impair.Config) {
		d.Queue = impair.QueueConfig{Discipline: impair.CoDel, LimitPackets: 1000, ECN: true, Target: 10 * time.Millisecond, Interval: 200 * time.Millisecond}
	})},
	{`queue: {discipline: fq_codel}`, with(func(d *impair.Config) {
		d.Queue = impair.QueueConfig{Discipline: impair.FQCoDel, LimitPackets: 1000, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond,
			Flows: 1024, Quantum: 1514}
	})},
	{`queue: {discipline: fq_codel, limit: 10240, flows: 16, quantum: 300}`, with(func(d *impair.Config) {
		d.Queue = impair.QueueConfig{Discipline: impair.FQCoDel, LimitPackets: 10240, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond,
			Flows: 16, Quantum: 300}
	})},
	{`queue: {discipline: pie}`, with(func(d *impair.Config) {
		d.Queue = impair.QueueConfig{Discipline: impair.PIE, LimitPackets: 1000, Target: 15 * time.Millisecond, TUpdate: 15 * time.Millisecond,
			Alpha: 0.125, Beta: 1.25, MaxBurst: 150 * time.Millisecond}
	})},
	{`queue: {discipline: pie, ecn: true, target: 20ms, tupdate: 30ms, alpha: 2, beta: 20, max_burst: 0}`, with(func(d *impair.Config) {
		d.Queue = impair.QueueConfig{Discipline: impair.PIE, LimitPackets: 1000, ECN: true, Target: 20 * time.Millisecond, TUpdate: 30 * time.Millisecond,
			Alpha: 2, Beta: 20}
	})},
	{`inflight_limit: 1`, with(func(d *impair.Config) { d.InflightLimit = 1 })},
	{`{loss: ~, rate: null}`, defaultDirection()},
}

// TestDirectionForms checks every form of every direction key, and the
// defaults filled in, on the uplink of `link: {uplink: ...}`.
func TestDirectionForms(t *testing.T) {
	for _, tt := range directionForms {
		s := mustParse(t, "link:\n  uplink:\n    "+tt.uplink+"\n")
		if !reflect.DeepEqual(s.Uplink, tt.want) {
			t.Errorf("uplink: %s\n got %+v\nwant %+v", tt.uplink, s.Uplink, tt.want)
		}
		if !reflect.DeepEqual(s.Downlink, defaultDirection()) {
			t.Errorf("uplink: %s\nchanged the downlink: %+v", tt.uplink, s.Downlink)
		}
	}

	// fq_codel's quantum follows the MTU.
	s := mustParse(t, "mtu: 9000\nlink: {queue: {discipline: fq_codel}}\n")
	if s.Uplink.Queue.Quantum != 9014 || s.Downlink.Queue.Quantum != 9014 {
		t.Errorf("quantum with mtu 9000 = %d, %d; want 9014", s.Uplink.Queue.Quantum, s.Downlink.Queue.Quantum)
	}
}

func TestMerge(t *testing.T) {
	s := mustParse(t, `
link:
  delay: {time: 50ms, jitter: 5ms}
  loss: 5%
  rate: 100Mbps
  uplink:
    delay: 10ms    # replaces the shared delay as a whole: no jitter
    rate: 10Mbps
    queue: 100
  downlink: {loss: ~}   # null is absent: the shared loss applies
`)
	up := with(func(d *impair.Config) {
		d.Delay.Time = 10 * time.Millisecond
		d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.05}
		d.Rate.Bitrate = 10_000_000
		d.Queue.LimitPackets = 100
	})
	down := with(func(d *impair.Config) {
		d.Delay.Time, d.Delay.Jitter = 50*time.Millisecond, 5*time.Millisecond
		d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.05}
		d.Rate.Bitrate = 100_000_000
	})
	if !reflect.DeepEqual(s.Uplink, up) {
		t.Errorf("uplink\n got %+v\nwant %+v", s.Uplink, up)
	}
	if !reflect.DeepEqual(s.Downlink, down) {
		t.Errorf("downlink\n got %+v\nwant %+v", s.Downlink, down)
	}
}

// TestErrors checks the exact message of every kind of error. Each file is
// parsed as x.yaml.
func TestErrors(t *testing.T) {
	tests := []struct {
		name, src string
		sets      []string
		want      string
	}{
		// Syntax and shape of the file.
		{name: "syntax", src: "link:\n  delay: 5ms\n uplink: {}\n",
			// The parser says line 2, where the mapping starts; the
			// misaligned line is 3.
			want: "x.yaml:3:2: yaml: did not find expected key (this line lines up with no key above it: the keys of one mapping start in the same column)"},
		{name: "syntax tab", src: "link:\n\tdelay: 5ms\n",
			want: "x.yaml:2:1: yaml: found character that cannot start any token (a tab in the indentation: YAML indents with spaces only)"},
		{name: "syntax tab after spaces", src: "name: x\nlink:\n  delay: 5ms\n  \tloss: 1%\n",
			want: "x.yaml:4:3: yaml: found a tab character that violates indentation (a tab in the indentation: YAML indents with spaces only)"},
		{name: "syntax at sign", src: "name: x\ndescription: @home\n",
			want: "x.yaml:2:14: yaml: found character that cannot start any token (a plain value cannot start with @: quote it)"},
		{name: "syntax two colons", src: "name: x\nlink:\n  delay: time: 5ms\n",
			want: `x.yaml:3:14: yaml: mapping values are not allowed in this context (a second ": " on one line: quote a value that holds one, or give the inner key its own line)`},
		{name: "syntax missing colon", src: "name: x\nlink:\n  delay 5ms\n  loss: 1%\n",
			want: `x.yaml:3:3: yaml: mapping values are not allowed in this context (no ":" after the key on this line)`},
		{name: "syntax over-indented", src: "name: x\nlink:\n  delay: 5ms\n    loss: 1%\n",
			want: "x.yaml:4:5: yaml: mapping values are not allowed in this context (indented more than the line above, whose key already has a value)"},
		{name: "syntax open quote", src: "name: \"x\nlink: {}\n",
			want: "x.yaml:1:7: yaml: found unexpected end of stream (a quote that is not closed)"},
		{name: "syntax open brace", src: "name: x\nlink: {delay: 5ms\n",
			want: "x.yaml:2:7: yaml: did not find expected ',' or '}' (a { that is not closed on its line)"},
		{name: "key at the wrong level", src: "name: x\nloss: 5%\n",
			want: "x.yaml:2: loss: unknown key at this level; did you mean link.loss?"},
		{name: "key one level too high", src: "link:\n  jitter: 5ms\n",
			want: "x.yaml:2: link.jitter: unknown key at this level; did you mean link.delay.jitter?"},
		{name: "key one level too high in a direction", src: "link:\n  uplink: {jitter: 5ms}\n",
			want: "x.yaml:2: link.uplink.jitter: unknown key at this level; did you mean link.uplink.delay.jitter?"},
		{name: "key of a list item at the top", src: "name: x\nsize: 5MB\n",
			want: "x.yaml:2: size: unknown key at this level; did you mean flows[].size?"},
		{name: "two documents", src: "name: a\n---\nname: b\n",
			want: "x.yaml:2: yaml: found a second document; a scenario is one YAML document"},
		{name: "not a mapping", src: "- a\n- b\n",
			want: "x.yaml:1: expected a mapping of scenario keys (name, duration, link, ...), got a list"},
		{name: "scalar file", src: "hello\n",
			want: `x.yaml:1: expected a mapping of scenario keys (name, duration, link, ...), got the string "hello"`},
		{name: "unknown anchor", src: "link: *nope\n",
			want: "x.yaml: yaml: unknown anchor 'nope' referenced"},
		{name: "alias cycle", src: "link: &l\n  uplink: *l\n",
			want: "x.yaml:2: yaml: alias *l refers to a node that contains it"},
		{name: "billion laughs", src: "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
			want: "x.yaml:1: yaml: more than 65536 nodes (keys, values and list items, aliases expanded): a scenario is at most that big"},

		// Keys.
		{name: "unknown key suggestion", src: "link:\n  uplink:\n    rat: 10Mbps\n",
			want: `x.yaml:3: link.uplink.rat: unknown key; did you mean "rate"?`},
		{name: "unknown key case", src: "Link: {}\n",
			want: `x.yaml:1: Link: unknown key; did you mean "link"?`},
		{name: "unknown key list", src: "link:\n  uplink:\n    bandwidth: 10Mbps\n",
			want: "x.yaml:3: link.uplink.bandwidth: unknown key (expected one of: corrupt, delay, duplicate, inflight_limit, loss, queue, rate, reorder, slot)"},
		{name: "unknown key short", src: "link: {loss: {x: 1}}\n",
			want: "x.yaml:1: link.loss.x: unknown key (expected one of: 1-h, 1-k, correlation, model, p, p13, p14, p23, p31, p32, r)\n" +
				"x.yaml:1: link.loss: missing key p (the loss probability)"},
		{name: "uplink in uplink", src: "link: {uplink: {downlink: {}}}\n",
			want: "x.yaml:1: link.uplink.downlink: unknown key (expected one of: corrupt, delay, duplicate, inflight_limit, loss, queue, rate, reorder, slot)"},
		{name: "duplicate key", src: "link:\n  delay: 5ms\n  loss: 1%\n  delay: 6ms\n",
			want: "x.yaml:4: link.delay: duplicate key (first at line 2)"},
		{name: "set key replaced", src: "link: {}\n", sets: []string{"link.loss=1%", "link={delay: 5ms}"},
			want: "--set link: replaces --set link.loss, given before it, which would be lost: give link first, or set loss inside it"},
		{name: "variant set key replaced", src: "variants:\n  - {name: a, set: {link.loss: 1%, link: {delay: 5ms}}}\n  - {name: b, set: {link: {delay: 5ms}, link.loss: 1%}}\n",
			want: "x.yaml:2: variants.a.set.link: replaces link.loss, set before it (line 2), which would be lost: put link first, or set loss inside it"},
		{name: "duplicate top-level key", src: "variants: []\nvariants: []\n",
			want: "x.yaml:2: variants: duplicate key (first at line 1)"},
		{name: "merge key", src: "base: &b {delay: 5ms}\nlink:\n  <<: *b\n",
			want: "x.yaml:1: base: unknown key; did you mean \"name\"?\nx.yaml:3: link: merge keys (<<) are not supported; write the keys out"},
		{name: "complex key", src: "link: {[a]: 1}\n",
			want: "x.yaml:1: link: expected a plain key, got a list"},

		// Wrong kinds.
		{name: "duration mapping", src: "duration: {s: 1}\n",
			want: "x.yaml:1: duration: expected a duration like 50ms, got a mapping"},
		{name: "link scalar", src: "link: 5ms\n",
			want: `x.yaml:1: link: expected a mapping of link keys, got the string "5ms"`},
		{name: "uplink list", src: "link: {uplink: [1]}\n",
			want: "x.yaml:1: link.uplink: expected a mapping of direction keys, got a list"},
		{name: "delay list", src: "link: {delay: [5ms]}\n",
			want: "x.yaml:1: link.delay: expected a duration like 50ms or a mapping of time, jitter, distribution, correlation, allow_reorder, got a list"},
		{name: "queue list", src: "link: {queue: []}\n",
			want: "x.yaml:1: link.queue: expected a packet count like 1000, a size like 1.5MB or a mapping of limit, bytes, discipline, ecn, target, interval, flows, quantum, tupdate, alpha, beta, max_burst, got an empty list"},
		{name: "mtu string", src: "mtu: \"1500\"\n",
			want: `x.yaml:1: mtu: expected an integer, got the string "1500"`},
		{name: "mtu float", src: "mtu: 1500.5\n",
			want: `x.yaml:1: mtu: expected an integer, got 1500.5`},
		{name: "seed string", src: "seed: abc\n",
			want: `x.yaml:1: seed: expected an integer, got the string "abc"`},
		{name: "bool", src: "link: {delay: {allow_reorder: yes}}\n",
			want: `x.yaml:1: link.delay.allow_reorder: expected true or false, got the string "yes"`},
		{name: "name list", src: "name: [a]\n",
			want: "x.yaml:1: name: expected text, got a list"},
		{name: "alpha string", src: "link: {queue: {discipline: pie, alpha: high}}\n",
			want: `x.yaml:1: link.queue.alpha: expected a number, got the string "high"`},

		// Units.
		{name: "rate unit", src: "link:\n  uplink:\n    rate: 10Mbs\n",
			want: `x.yaml:3: link.uplink.rate: "10Mbs" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{name: "rate ambiguous", src: "link: {rate: 100mbps}\n",
			want: `x.yaml:1: link.rate: "100mbps" is ambiguous (tc reads mbps as bytes per second): write 100Mbps for bits per second`},
		{name: "rate bytes", src: "link: {rate: 10MBps}\n",
			want: `x.yaml:1: link.rate: "10MBps" is in bytes per second, but rates are in bits per second: write 80Mbps`},
		{name: "rate zero", src: "link: {rate: 0Mbps}\n",
			want: `x.yaml:1: link.rate: 0Mbps is out of range (expected more than 0; write unlimited for no rate limit)`},
		{name: "rate mapping bitrate", src: "link: {rate: {bitrate: fast}}\n",
			want: `x.yaml:1: link.rate.bitrate: "fast" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{name: "duration unit", src: "duration: 30\n",
			want: `x.yaml:1: duration: "30" is not a duration (missing unit; examples: 50ms, 250us, 1.5s)`},
		{name: "duration zero", src: "duration: 0s\n",
			want: `x.yaml:1: duration: 0s is out of range (expected more than 0s, up to 24h)`},
		{name: "duration long", src: "duration: 25h\n",
			want: `x.yaml:1: duration: 25h is out of range (expected more than 0s, up to 24h)`},
		{name: "delay negative", src: "link: {delay: -5ms}\n",
			want: `x.yaml:1: link.delay: -5ms is out of range (expected 0s to 1h)`},
		{name: "delay bool", src: "link: {delay: true}\n",
			want: `x.yaml:1: link.delay: "true" is not a duration (examples: 50ms, 250us, 1.5s)`},
		{name: "ratio", src: "link: {loss: 5 percent}\n",
			want: `x.yaml:1: link.loss: "5 percent" is not a ratio (examples: 5%, 0.05)`},
		{name: "ratio range", src: "link: {loss: 150%}\n",
			want: `x.yaml:1: link.loss: 150% is out of range (expected 0% to 100%)`},
		{name: "ratio above one", src: "link: {duplicate: 2}\n",
			want: `x.yaml:1: link.duplicate: 2 is out of range (expected 0% to 100%)`},
		{name: "correlation range", src: "link: {loss: {p: 1%, correlation: 100%}}\n",
			want: `x.yaml:1: link.loss.correlation: 100% is out of range (expected 0% up to but not including 100%)`},
		{name: "size unit", src: "link: {queue: 10K}\n",
			want: `x.yaml:1: link.queue: "10K" is ambiguous: write 10KB (powers of 1000) or 10KiB (powers of 1024)`},
		{name: "size bits", src: "link: {queue: {bytes: 10Mb}}\n",
			want: `x.yaml:1: link.queue.bytes: "10Mb" is ambiguous (bits or bytes?): sizes are in bytes, write 10MB or 10MiB`},
		{name: "queue quoted number", src: "link: {queue: \"1000\"}\n",
			want: `x.yaml:1: link.queue: "1000" is ambiguous: write 1000 for packets or 1000B for bytes`},
		{name: "queue size range", src: "link: {queue: 2GiB}\n",
			want: `x.yaml:1: link.queue: 2GiB is out of range (expected 1B to 1073741824B)`},

		// Ranges of integers and numbers.
		{name: "mtu range", src: "mtu: 100\n",
			want: "x.yaml:1: mtu: 100 is out of range (expected 576 to 65535)"},
		{name: "seed negative", src: "seed: -1\n",
			want: "x.yaml:1: seed: -1 is out of range (expected 0 to 18446744073709551615)"},
		{name: "int overflow", src: "mtu: 99999999999999999999\n",
			want: "x.yaml:1: mtu: expected an integer, got 99999999999999999999"},
		{name: "queue zero", src: "link: {queue: 0}\n",
			want: "x.yaml:1: link.queue: 0 is out of range (expected 1 to 1048576)"},
		{name: "inflight", src: "link: {inflight_limit: 0}\n",
			want: "x.yaml:1: link.inflight_limit: 0 is out of range (expected 1 to 1048576)"},
		{name: "gap", src: "link: {delay: 1ms, reorder: {p: 1%, gap: 0}}\n",
			want: "x.yaml:1: link.reorder.gap: 0 is out of range (expected 1 to 1048576)"},
		{name: "overhead", src: "link: {rate: {bitrate: 1Mbps, packet_overhead: -2000}}\n",
			want: "x.yaml:1: link.rate.packet_overhead: -2000 is out of range (expected -1500 to 1500)"},
		{name: "cell size", src: "link: {rate: {bitrate: 1Mbps, cell_size: -1}}\n",
			want: "x.yaml:1: link.rate.cell_size: -1 is out of range (expected 0 to 65535)"},
		{name: "beta", src: "link: {queue: {discipline: pie, beta: 33}}\n",
			want: "x.yaml:1: link.queue.beta: 33 is out of range (expected 0 to 32)"},
		{name: "flows", src: "link: {queue: {discipline: fq_codel, flows: 0}}\n",
			want: "x.yaml:1: link.queue.flows: 0 is out of range (expected 1 to 65536)"},
		{name: "target zero", src: "link: {queue: {discipline: codel, target: 0}}\n",
			want: "x.yaml:1: link.queue.target: 0 is out of range (expected more than 0s, up to 1h)"},

		// Words.
		{name: "distribution suggestion", src: "link: {delay: {jitter: 1ms, distribution: Normal}}\n",
			want: `x.yaml:1: link.delay.distribution: "Normal" is not a distribution; did you mean "normal"?`},
		{name: "distribution list", src: "link: {delay: {jitter: 1ms, distribution: gauss}}\n",
			want: `x.yaml:1: link.delay.distribution: "gauss" is not a distribution (expected one of: uniform, normal, pareto, paretonormal)`},
		{name: "discipline", src: "link: {queue: {discipline: fq-codel}}\n",
			want: `x.yaml:1: link.queue.discipline: "fq-codel" is not a queue discipline; did you mean "fq_codel"?`},
		{name: "model", src: "link: {loss: {model: bernoulli}}\n",
			want: `x.yaml:1: link.loss.model: "bernoulli" is not a loss model (expected one of: random, gemodel, state)`},
		{name: "name", src: "name: tcp vs udp\n",
			want: `x.yaml:1: name: "tcp vs udp" is not a valid name (use letters, digits, '.', '_' and '-')`},
		{name: "name dots", src: "name: ..\n",
			want: `x.yaml:1: name: ".." is not a valid name (use letters, digits, '.', '_' and '-')`},
		{name: "name long", src: "name: " + strings.Repeat("a", 65) + "\n",
			want: `x.yaml:1: name: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa..." is not a valid name (at most 64 characters)`},

		// Relations between keys.
		{name: "reorder without delay", src: "link:\n  uplink:\n    reorder: 1%\n",
			want: "x.yaml:3: link.uplink.reorder: reorder needs a delay in this direction to reorder against"},
		{name: "shared reorder without delay", src: "link:\n  reorder: 1%\n  uplink: {delay: 5ms}\n",
			want: "x.yaml:2: link.reorder: reorder needs a delay in this direction to reorder against (the downlink has none)"},
		{name: "reorder with jitter only", src: "link: {delay: {jitter: 5ms}, reorder: 1%, uplink: {}, downlink: {delay: 1ms}}\n",
			want: "x.yaml:1: link.reorder: reorder needs a delay in this direction to reorder against (the uplink has none)"},
		{name: "distribution without jitter", src: "link: {delay: {time: 5ms, distribution: pareto}}\n",
			want: "x.yaml:1: link.delay.distribution: distribution pareto needs a jitter to shape"},
		{name: "gemodel key on random", src: "link: {loss: {p: 1%, r: 5%}}\n",
			want: "x.yaml:1: link.loss.r: applies to model gemodel only (the model is random)"},
		{name: "p on state", src: "link: {loss: {model: state, p: 1%, p13: 1%}}\n",
			want: "x.yaml:1: link.loss.p: applies to models random and gemodel only (the model is state)"},
		{name: "missing p", src: "link: {loss: {model: gemodel, r: 5%}}\n",
			want: "x.yaml:1: link.loss: missing key p (the probability of going from the good to the bad state)"},
		{name: "missing p13", src: "link: {loss: {model: state}}\n",
			want: "x.yaml:1: link.loss: missing key p13 (the probability of going from no loss to a burst)"},
		{name: "state sums", src: "link: {loss: {model: state, p13: 80%, p14: 30%, p32: 90%}}\n",
			want: "x.yaml:1: link.loss: p13 + p14 is more than 100% (80% + 30%)\nx.yaml:1: link.loss: p31 + p32 is more than 100% (20% + 90%)"},
		{name: "state sums with p31", src: "link: {loss: {model: state, p13: 10%, p31: 70%, p32: 40%}}\n",
			want: "x.yaml:1: link.loss: p31 + p32 is more than 100% (70% + 40%)"},
		{name: "missing chance p", src: "link: {duplicate: {correlation: 5%}}\n",
			want: "x.yaml:1: link.duplicate: missing key p (the probability)"},
		{name: "missing bitrate", src: "link: {rate: {packet_overhead: 5}}\n",
			want: "x.yaml:1: link.rate: missing key bitrate (or trace)"},
		{name: "cell overhead alone", src: "link: {rate: {bitrate: 1Mbps, cell_overhead: 5}}\n",
			want: "x.yaml:1: link.rate.cell_overhead: needs a cell_size (cells are what the overhead is added to)"},
		{name: "slot max < min", src: "link: {slot: {min: 10ms, max: 5ms}}\n",
			want: "x.yaml:1: link.slot.max: 5ms is less than min 10ms"},
		{name: "slot limits without time", src: "link: {slot: {packets: 5}}\n",
			want: "x.yaml:1: link.slot: packets and bytes need slots: set min or max"},
		{name: "discipline key", src: "link:\n  queue:\n    discipline: codel\n    flows: 10\n",
			want: "x.yaml:4: link.queue.flows: applies to fq_codel only (the discipline is codel)"},
		{name: "ecn on droptail", src: "link: {queue: {ecn: true}}\n",
			want: "x.yaml:1: link.queue.ecn: applies to codel, fq_codel and pie only (the discipline is droptail)"},
		{name: "interval on pie", src: "link: {queue: {discipline: pie, interval: 100ms}}\n",
			want: "x.yaml:1: link.queue.interval: applies to codel and fq_codel only (the discipline is pie)"},
		{name: "queue bytes below mtu", src: "mtu: 9000\nlink: {queue: {bytes: 8KB}}\n",
			want: "x.yaml:2: link.queue.bytes: 8KB is less than the MTU (9000 bytes), so a full-size packet could never be queued"},
		{name: "queue size below mtu", src: "link: {queue: 1KB}\n",
			want: "x.yaml:1: link.queue: 1KB is less than the MTU (1500 bytes), so a full-size packet could never be queued"},
		{name: "flow without type", src: "flows:\n  - {name: bulk, cc: cubic}\n",
			want: "x.yaml:2: flows.bulk.type: a flow needs a type (tcp or udp)"},
		{name: "flows mapping", src: "flows: {}\n",
			want: "x.yaml:1: flows: expected a list of flows, got an empty mapping"},
		{name: "flow cc", src: "flows:\n  - {name: bulk, type: tcp, size: 1MB, cc: bbr}\n",
			want: `x.yaml:2: flows.bulk.cc: "bbr" is not a congestion control of netstack TCP (expected one of: reno, cubic)`},
		{name: "flow cc typo", src: "flows:\n  - {name: bulk, type: tcp, size: 1MB, cc: cubik}\n",
			want: `x.yaml:2: flows.bulk.cc: "cubik" is not a congestion control of netstack TCP; did you mean "cubic"?`},
		{name: "tcp needs size", src: "flows:\n  - {name: bulk, type: tcp}\n",
			want: "x.yaml:2: flows.bulk: a tcp flow needs a size or a duration"},
		{name: "udp key on tcp", src: "flows:\n  - {name: bulk, type: tcp, size: 1MB, rate: 5Mbps}\n",
			want: "x.yaml:2: flows.bulk.rate: applies to udp flows only (this flow is tcp)"},
		{name: "udp rate and interval", src: "flows:\n  - {name: v, type: udp, rate: 1Mbps, interval: 2ms, count: 5}\n",
			want: "x.yaml:2: flows.v.interval: give a rate or an interval, not both"},
		{name: "udp packet size", src: "mtu: 1500\nflows:\n  - {name: v, type: udp, rate: 1Mbps, count: 5, packet_size: 1473}\n",
			want: "x.yaml:3: flows.v.packet_size: 1473 is out of range (expected 24 to 1472)"},
		{name: "udp needs count", src: "flows:\n  - {name: v, type: udp, interval: 2ms}\n",
			want: "x.yaml:2: flows.v: a udp flow needs a count or a duration"},
		{name: "flow start", src: "duration: 5s\nflows:\n  - {name: v, type: udp, interval: 2ms, count: 3, start: 5s}\n",
			want: "x.yaml:3: flows.v.start: 5s is not before the end of the run (duration 5s)"},
		{name: "flow names", src: "flows:\n  - {name: v, type: udp, interval: 2ms, count: 3}\n  - {name: v, type: udp, interval: 2ms, count: 3}\n",
			want: `x.yaml:3: flows[1].name: "v" names two flows (first at line 2)`},
		{name: "flow name with a dot", src: "flows:\n  - {name: a.b, type: udp, interval: 2ms, count: 3}\n",
			want: `x.yaml:2: flows[0].name: "a.b" is not a valid name (use letters, digits, '_' and '-': a '.' would split the dotted keys that name it)`},
		{name: "link name with a dot", src: "links:\n  - {name: a.client, delay: 1ms}\n",
			want: `x.yaml:2: links[0].name: "a.client" is not a valid name (use letters, digits, '_' and '-': a '.' would split the dotted keys that name it)`},
		{name: "flow stack", src: "flows:\n  - {name: v, type: udp, interval: 2ms, count: 3, stack: gvisor}\n",
			want: `x.yaml:2: flows.v.stack: "gvisor" is not a flow stack (expected one of: netstack, kernel)`},
		{name: "flow stack typo", src: "flows:\n  - {name: v, type: udp, interval: 2ms, count: 3, stack: kernl}\n",
			want: `x.yaml:2: flows.v.stack: "kernl" is not a flow stack; did you mean "kernel"?`},
		{name: "sample interval", src: "sample_interval: 100us\n",
			want: "x.yaml:1: sample_interval: 100us is out of range (expected 1ms to 1m)"},
		{name: "clock", src: "clock: simulated\n",
			want: `x.yaml:1: clock: "simulated" is not a clock (expected one of: real, virtual)`},
		{name: "virtual clock with tun", src: "clock: virtual\ntun: {}\n",
			want: "x.yaml:1: clock: virtual runs labs of netstack hosts only, and this run has a tun section: TUN mode and kernel flows run on the wall clock (use clock: real)"},
		{name: "virtual clock, tcp across no rate", src: "clock: virtual\nlink: {delay: 10ms, slot: {min: 1ms}}\nflows: [{name: a, type: tcp, duration: 2s}, {name: u, type: udp, rate: 1Mbps, duration: 2s}]\n",
			want: "x.yaml:1: clock: virtual: tcp flow a sends for a duration across no rate (link): on the virtual clock, a path whose only limits are delays moves any amount of data in no time, and the run's time would not advance; give a link it crosses a rate (link.rate: 100Mbps), give the flow a size, or use clock: real"},
		{name: "virtual clock, tcp path across no rate", src: "clock: virtual\nlinks: [{name: x, delay: 1ms}, {name: y, uplink: {rate: 1Mbps}}]\npaths: [{name: p, via: [x], match: {dst: 10.9.0.0/24}}, {name: q, via: [y]}]\nflows: [{name: ok, type: tcp, duration: 2s}, {name: sized, type: tcp, size: 1MB, path: p}, {name: fast, type: tcp, duration: 2s, path: p}]\n",
			want: "x.yaml:1: clock: virtual: tcp flow fast sends for a duration across no rate (x): on the virtual clock, a path whose only limits are delays moves any amount of data in no time, and the run's time would not advance; give a link it crosses a rate (link.rate: 100Mbps), give the flow a size, or use clock: real"},
		{name: "virtual clock with a tun variant", src: "clock: virtual\nvariants:\n  - {name: k, set: {tun: {}}}\n",
			want: "x.yaml:1: variant k: clock: virtual runs labs of netstack hosts only, and this run has a tun section: TUN mode and kernel flows run on the wall clock (use clock: real)"},

		// One mistake, one message: no relation errors on invalid values.
		{name: "no cascade", src: "mtu: big\nlink: {delay: 5 parsecs, reorder: 1%, queue: {bytes: 1KB}}\n",
			want: "x.yaml:1: mtu: expected an integer, got the string \"big\"\nx.yaml:2: link.delay: \"5 parsecs\" is not a duration (examples: 50ms, 250us, 1.5s)"},

		// The command line.
		{name: "set value", src: "link: {}\n", sets: []string{"link.uplink.rate=10Mbs"},
			want: `--set link.uplink.rate: "10Mbs" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{name: "set unknown key", src: "", sets: []string{"link.uplink.rat=10Mbps"},
			want: `--set link.uplink.rat: unknown key; did you mean "rate"?`},
		{name: "set syntax", src: "", sets: []string{"link.delay={time: 5ms"},
			want: `--set link.delay: yaml: did not find expected ',' or '}'`},
		{name: "set no equals", src: "", sets: []string{"link.delay"},
			want: `--set: "link.delay" is not KEY=VALUE`},
		{name: "set empty key", src: "", sets: []string{"link..delay=5ms"},
			want: `--set link..delay: empty key in path (expected dotted keys like link.uplink.rate)`},
		{name: "set into scalar", src: "link: {delay: 50ms}\n", sets: []string{"link.delay.jitter=5ms"},
			want: `--set link.delay.jitter: cannot set a key inside link.delay, which holds the string "50ms"; set link.delay itself to a mapping instead`},
		{name: "set named item", src: "flows: []\n", sets: []string{"flows.bulk.cc=reno"},
			want: `--set flows.bulk.cc: flows is a list without named items, so "bulk" cannot address one`},
		{name: "set variants", src: "", sets: []string{"variants.a.set=1"},
			want: `--set variants.a.set: variants cannot be overridden`},
		{name: "set kind", src: "", sets: []string{"link.delay=[1]"},
			want: `--set link.delay: expected a duration like 50ms or a mapping of time, jitter, distribution, correlation, allow_reorder, got a list`},
		{name: "set duplicate key", src: "", sets: []string{"link={rate: 1Mbps, rate: 2Mbps}"},
			want: `--set link.rate: duplicate key`},
		{name: "set relation", src: "link: {reorder: 5%}\n", sets: []string{"link.delay=0"},
			want: "x.yaml:1: link.reorder: reorder needs a delay in this direction to reorder against"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parse(tt.src, tt.sets...)
			if err == nil {
				t.Fatalf("Parse succeeded with %d runs, want error:\n%s", len(p.Runs), tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse error:\n%s\nwant:\n%s", got, tt.want)
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Errorf("Parse error is a %T, want a non-empty Errors", err)
			}
		})
	}
}

func TestCommandLineErrors(t *testing.T) {
	d := -time.Second
	_, err := Parse("x.yaml", []byte("duration: 10s\n"), Options{Duration: &d})
	want := "--duration: -1s is out of range (expected more than 0s, up to 24h)"
	if err == nil || err.Error() != want {
		t.Errorf("Parse with --duration -1s: %v, want %s", err, want)
	}
}

// TestAllErrors checks that a file with many mistakes gets all of them at
// once, in line order, with command-line errors last.
func TestAllErrors(t *testing.T) {
	src := `name: bad name
seed: -1
duration: 0
link:
  delay: {time: 50ms, jitter: 5ms, distribution: gauss}
  loss: {model: gemodel, p: 1%, r: 150%, p13: 5%}
  uplink:
    rat: 10Mbps
    rate: 10Mbs
    queue: {discipline: codel, flows: 10}
  downlink: {rate: 1Gbps, rate: 2Gbps, slot: {min: 10ms, max: 5ms}}
  duplicate: [1]
flows: [a]
`
	want := `x.yaml:1: name: "bad name" is not a valid name (use letters, digits, '.', '_' and '-')
x.yaml:2: seed: -1 is out of range (expected 0 to 18446744073709551615)
x.yaml:3: duration: 0 is out of range (expected more than 0s, up to 24h)
x.yaml:5: link.delay.distribution: "gauss" is not a distribution (expected one of: uniform, normal, pareto, paretonormal)
x.yaml:6: link.loss.p13: applies to model state only (the model is gemodel)
x.yaml:6: link.loss.r: 150% is out of range (expected 0% to 100%)
x.yaml:8: link.uplink.rat: unknown key; did you mean "rate"?
x.yaml:9: link.uplink.rate: "10Mbs" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)
x.yaml:10: link.uplink.queue.flows: applies to fq_codel only (the discipline is codel)
x.yaml:11: link.downlink.rate: duplicate key (first at line 11)
x.yaml:11: link.downlink.slot.max: 5ms is less than min 10ms
x.yaml:12: link.duplicate: expected a ratio like 5% or a mapping of p, correlation, got a list
x.yaml:13: flows[0]: expected a mapping of flow keys, got the string "a"
--set link.mtu: unknown key (expected one of: corrupt, delay, downlink, duplicate, inflight_limit, loss, queue, rate, reorder, slot, uplink)
--set link.loss.p: 200% is out of range (expected 0% to 100%)`
	_, err := parse(src, "link.mtu=1500", "link.loss.p=200%")
	if err == nil || err.Error() != want {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, want)
	}
	var es Errors
	if errors.As(err, &es) {
		if e := es[5]; e.File != "x.yaml" || e.Line != 6 || e.Origin != "" || e.Path != "link.loss.r" || e.Msg != "150% is out of range (expected 0% to 100%)" {
			t.Errorf("es[5] = %+v", *e)
		}
		if e := es[len(es)-1]; e.File != "" || e.Line != 0 || e.Origin != "--set" || e.Path != "link.loss.p" {
			t.Errorf("last = %+v", *e)
		}
	}
}

func TestOverrides(t *testing.T) {
	src := `
name: base
seed: 1
duration: 10s
link:
  delay: 50ms
  loss: 5%
`
	seed := uint64(7)
	dur := 2 * time.Minute
	p, err := Parse("x.yaml", []byte(src), Options{
		Sets: []string{
			"link.uplink.rate=10Mbps",              // creates link.uplink
			"link.delay={time: 5ms, jitter: 1ms}",  // a mapping fragment
			"link.downlink.queue.discipline=codel", // creates two levels
			"link.loss=",                           // null: removes the key
			"description=from the command line",    // a top-level key
			"link.downlink.queue.limit=1",          // sets are applied in order
			"link.downlink.queue.limit=50",         // ... the last one wins
			"duration=1s",                          // --duration wins over --set
			" link.uplink.inflight_limit = 100",    // spaces around KEY are trimmed
		},
		Seed:     &seed,
		Duration: &dur,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Runs[0]
	want := Scenario{
		Name:           "base",
		Description:    "from the command line",
		Seed:           7,
		SeedSet:        true,
		Duration:       2 * time.Minute,
		MTU:            1500,
		SampleInterval: 100 * time.Millisecond,
		Uplink: with(func(d *impair.Config) {
			d.Delay.Time, d.Delay.Jitter = 5*time.Millisecond, time.Millisecond
			d.Rate.Bitrate = 10_000_000
			d.InflightLimit = 100
		}),
		Downlink: with(func(d *impair.Config) {
			d.Delay.Time, d.Delay.Jitter = 5*time.Millisecond, time.Millisecond
			d.Queue = impair.QueueConfig{Discipline: impair.CoDel, LimitPackets: 50, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond}
		}),
	}
	if !reflect.DeepEqual(exported(s), want) {
		t.Errorf("got\n%+v\nwant\n%+v", exported(s), want)
	}
}

func TestSetPathNamedItems(t *testing.T) {
	root, _, msg := parseYAML([]byte(`
flows:
  - {name: bulk, cc: cubic}
  - {name: video, cc: bbr}
plain: [1, 2]
`))
	if msg != "" {
		t.Fatal(msg)
	}
	noop := func(*yaml.Node) {}
	for key, value := range map[string]string{
		"flows.video.cc":       "reno",
		"flows.bulk.size.max":  "10MB",
		"flows.bulk.cc":        "vegas",
		"flows.video.start.at": "1s",
	} {
		if err := setPath(root, key, stringNode(value), noop); err != nil {
			t.Errorf("setPath(%s): %v", key, err)
		}
	}
	got := lookup(root, "flows")
	want := map[string]map[string]string{
		"bulk":  {"cc": "vegas"},
		"video": {"cc": "reno"},
	}
	for _, item := range got.Content {
		name := lookup(item, "name").Value
		if cc := lookup(item, "cc").Value; cc != want[name]["cc"] {
			t.Errorf("flows.%s.cc = %s, want %s", name, cc, want[name]["cc"])
		}
	}
	if v := lookup(lookup(got.Content[0], "size"), "max").Value; v != "10MB" {
		t.Errorf("flows.bulk.size.max = %s", v)
	}
	if v := lookup(lookup(got.Content[1], "start"), "at").Value; v != "1s" {
		t.Errorf("flows.video.start.at = %s", v)
	}

	for key, want := range map[string]string{
		"flows.audio.cc": `flows has no item named "audio" (names: bulk, video)`,
		"plain.1":        `plain is a list without named items, so "1" cannot address one`,
		"flows.bulk.cc.x": `cannot set a key inside flows.bulk.cc, which holds the string "vegas"; ` +
			`set flows.bulk.cc itself to a mapping instead`,
	} {
		if err := setPath(root, key, stringNode("v"), noop); err == nil || err.Error() != want {
			t.Errorf("setPath(%s) = %v, want %s", key, err, want)
		}
	}
}

func TestVariants(t *testing.T) {
	src := `
name: v
link:
  delay: 50ms
  loss: 5%
variants:
  - {name: no-loss, set: {link.loss: 0%, link.delay: 0ms}}
  - name: loss-5
  - name: nested
    set:
      link.uplink.delay.jitter: 5ms
      link.uplink.delay.time: 10ms
`
	p, err := parse(src, "link.downlink.rate=1Mbps")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "v" || len(p.Runs) != 3 {
		t.Fatalf("plan %s with %d runs, want v with 3", p.Name, len(p.Runs))
	}
	want := []Scenario{
		{Name: "v", Variant: "no-loss", Duration: 30 * time.Second, MTU: 1500, SampleInterval: 100 * time.Millisecond,
			Uplink: with(func(d *impair.Config) { d.Loss = impair.LossConfig{Model: impair.LossRandom} }),
			Downlink: with(func(d *impair.Config) {
				d.Loss = impair.LossConfig{Model: impair.LossRandom}
				d.Rate.Bitrate = 1_000_000
			}),
		},
		{Name: "v", Variant: "loss-5", Duration: 30 * time.Second, MTU: 1500, SampleInterval: 100 * time.Millisecond,
			Uplink: with(func(d *impair.Config) {
				d.Delay.Time = 50 * time.Millisecond
				d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.05}
			}),
			Downlink: with(func(d *impair.Config) {
				d.Delay.Time = 50 * time.Millisecond
				d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.05}
				d.Rate.Bitrate = 1_000_000
			}),
		},
		{Name: "v", Variant: "nested", Duration: 30 * time.Second, MTU: 1500, SampleInterval: 100 * time.Millisecond,
			Uplink: with(func(d *impair.Config) {
				d.Delay.Time, d.Delay.Jitter = 10*time.Millisecond, 5*time.Millisecond
				d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.05}
			}),
			Downlink: with(func(d *impair.Config) {
				d.Delay.Time = 50 * time.Millisecond
				d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.05}
				d.Rate.Bitrate = 1_000_000
			}),
		},
	}
	for i, run := range p.Runs {
		if !reflect.DeepEqual(exported(run), want[i]) {
			t.Errorf("run %d\n got %+v\nwant %+v", i, exported(run), want[i])
		}
	}
}

func TestVariantErrors(t *testing.T) {
	src := `link:
  delay: 50ms
  reorder: 1%
  rate: 10Mbps
  loss: 150%
variants:
  - name: bad-rate
    set:
      link.rate: 10Mbs
      link.uplink.rat: 1Mbps
  - name: no-delay
    set:
      link.delay: 0
  - name: into-scalar
    set: {link.rate.bitrate: 1Mbps}
  - name: no-delay
  - name: bad name
  - {set: {}}
  - name: rename
    set: {name: other, variants.x: 1, "": 5}
  - name: wrong-kind
    set: [link.rate]
  - name: extra
    sets: {}
  - 5
`
	want := `x.yaml:3: variant no-delay: link.reorder: reorder needs a delay in this direction to reorder against
x.yaml:5: link.loss: 150% is out of range (expected 0% to 100%)
x.yaml:9: variant bad-rate: link.rate: "10Mbs" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)
x.yaml:10: variant bad-rate: link.uplink.rat: unknown key; did you mean "rate"?
x.yaml:15: variant into-scalar: link.rate.bitrate: cannot set a key inside link.rate, which holds the string "10Mbps"; set link.rate itself to a mapping instead
x.yaml:16: variants.no-delay.name: duplicate variant name (first at line 11)
x.yaml:17: variants[4].name: "bad name" is not a valid name (use letters, digits, '.', '_' and '-')
x.yaml:18: variants[5]: missing key name
x.yaml:20: variants.rename.set.name: a variant cannot change the scenario name
x.yaml:20: variants.rename.set.variants.x: variants cannot be overridden
x.yaml:20: variant rename: empty key in path (expected dotted keys like link.uplink.rate)
x.yaml:22: variants.wrong-kind.set: expected a mapping of dotted keys to values, got a list
x.yaml:24: variants[8].sets: unknown key; did you mean "set"?
x.yaml:25: variants[9]: expected a mapping with name and set, got 5`
	_, err := parse(src)
	if err == nil || err.Error() != want {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, want)
	}

	// An error of the base scenario is reported once, not once per variant;
	// a --set error that only a variant causes names the variant.
	src = `link: {loss: 150%}
variants:
  - name: a
  - name: b
    set: {link.delay: 5ms}
`
	want = `x.yaml:1: link.loss: 150% is out of range (expected 0% to 100%)
--set link.delay.jitter: cannot set a key inside link.delay, which holds the string "5ms"; set link.delay itself to a mapping instead (with variant b)`
	_, err = parse(src, "link.delay.jitter=1ms")
	if err == nil || err.Error() != want {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, want)
	}
}

// TestYAMLRoundTrip checks that YAML writes a file that parses back to the
// same scenario, for every run of a few plans.
func TestYAMLRoundTrip(t *testing.T) {
	seed := uint64(99)
	dur := 45 * time.Second
	cases := []struct {
		name, src string
		o         Options
	}{
		{"defaults", "", Options{}},
		{"defaults with seed", "", Options{Seed: &seed}},
		{"anchors and comments", `
# head
name: rt  # line
description: |
  two
  lines
link: &l
  delay: {time: 5ms, jitter: 1ms, distribution: normal}
  loss: 33.3%
  uplink: {rate: 1.5Gbps, queue: {discipline: fq_codel, bytes: 64KiB}}
  downlink:
    loss: {model: state, p13: 1%}
    slot: {min: 1ms, max: 3ms, bytes: 3000}
variants:
  - {name: a, set: {link.loss: ~, link.downlink.rate: "100Mbps"}}
  - {name: b, set: {seed: 5, duration: 1m30s}}
`, Options{Sets: []string{"link.uplink.queue.ecn=true"}, Duration: &dur}},
	}
	files, _ := filepath.Glob("../configs/*.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name, src string
			o         Options
		}{f, string(data), Options{}})
	}
	for _, c := range cases {
		// A shipped config is parsed under its own name: its trace
		// files are found next to it.
		file := "x.yaml"
		if strings.HasSuffix(c.name, ".yaml") {
			file = c.name
		}
		p, err := Parse(file, []byte(c.src), c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, run := range p.Runs {
			out, err := run.YAML()
			if err != nil {
				t.Fatalf("%s/%s: YAML: %v", c.name, run.Variant, err)
			}
			if !strings.HasPrefix(string(out), "# netjam scenario resolved from "+file) {
				t.Errorf("%s/%s: YAML does not start with the header comment:\n%s", c.name, run.Variant, out)
			}
			back, err := Parse("elsewhere.yaml", out, Options{})
			if err != nil {
				t.Fatalf("%s/%s: parsing YAML output: %v\n%s", c.name, run.Variant, err, out)
			}
			want := exported(run)
			want.Variant = ""
			if len(back.Runs) != 1 || !reflect.DeepEqual(exported(back.Runs[0]), want) {
				t.Errorf("%s/%s: round trip\n got %+v\nwant %+v\nYAML:\n%s", c.name, run.Variant, exported(back.Runs[0]), want, out)
			}
			if strings.Contains(string(out), "variants") {
				t.Errorf("%s/%s: YAML still has variants:\n%s", c.name, run.Variant, out)
			}
		}
	}
}

func TestYAMLSeed(t *testing.T) {
	p, err := parse("name: s\nlink: {delay: 5ms}\nvariants: [{name: one}]\n")
	if err != nil {
		t.Fatal(err)
	}
	s := p.Runs[0]
	out, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	want := `# netjam scenario resolved from x.yaml, variant one:
# every override is applied.

name: s
link: {delay: 5ms}
`
	if string(out) != want {
		t.Errorf("YAML without seed:\n%s\nwant:\n%s", out, want)
	}

	// The emulator picks a seed and records it; YAML then writes it.
	s.Seed, s.SeedSet = 1234, true
	out, err = s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	want = `# netjam scenario resolved from x.yaml, variant one:
# every override is applied and seed is the one the run used.

name: s
seed: 1234
link: {delay: 5ms}
`
	if string(out) != want {
		t.Errorf("YAML with seed:\n%s\nwant:\n%s", out, want)
	}

	if _, err := (&Scenario{}).YAML(); err == nil {
		t.Error("YAML of a Scenario not from Parse succeeded")
	}
}

// TestConfigs parses every scenario shipped in configs/.
func TestConfigs(t *testing.T) {
	files, err := filepath.Glob("../configs/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no configs/*.yaml")
	}
	for _, f := range files {
		if _, err := Load(f, Options{}); err != nil {
			t.Errorf("%v", err)
		}
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), Options{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want os.ErrNotExist", err)
	}
}

// TestLoadTooBig: a file of more than MaxFileSize bytes is refused
// before it is decoded (an 8.3 MB timeline of 200000 entries took 333 MB
// before the node limit refused it), a file of MaxFileSize bytes is read.
func TestLoadTooBig(t *testing.T) {
	dir := t.TempDir()
	// A file of comments: valid whatever its size, so that only the
	// size can refuse it.
	comments := func(n int) string {
		line := "# " + strings.Repeat("x", 61) + "\n"
		return strings.Repeat(line, n/len(line)) + strings.Repeat("#", n%len(line))
	}
	for _, c := range []struct {
		name string
		size int
		want string
	}{
		{"at-the-limit.yaml", MaxFileSize, ""},
		{"past-the-limit.yaml", MaxFileSize + 1, "more than 1048576 bytes (1 MiB): a scenario file is at most that big"},
		{"timeline-of-200000-entries.yaml", 8_300_000, "more than 1048576 bytes (1 MiB): a scenario file is at most that big"},
	} {
		f := filepath.Join(dir, c.name)
		if err := os.WriteFile(f, []byte(comments(c.size)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(f, Options{})
		if c.want == "" && err != nil || c.want != "" && fmt.Sprint(err) != f+": "+c.want {
			t.Errorf("%s: %v\nwant: %s: %s", c.name, err, f, c.want)
		}
	}
	// A device has no size to check first: reading it stops one byte
	// past the limit.
	if _, err := Load("/dev/zero", Options{}); fmt.Sprint(err) != "/dev/zero: more than 1048576 bytes (1 MiB): a scenario file is at most that big" {
		t.Errorf("/dev/zero: %v", err)
	}
}

func TestSuggest(t *testing.T) {
	opts := []string{"rate", "delay", "loss", "p", "r"}
	for word, want := range map[string]string{
		"rat":      "rate",
		"Rate":     "rate",
		"dealy":    "delay",
		"los":      "loss",
		"x":        "", // one edit from p and r, but one-letter words are not corrected
		"bandwith": "",
		"":         "",
	} {
		if got := suggest(word, opts); got != want {
			t.Errorf("suggest(%q) = %q, want %q", word, got, want)
		}
	}
}

func TestFlows(t *testing.T) {
	p, err := Parse("x.yaml", []byte(`
duration: 20s
sample_interval: 50ms
flows:
  - {name: bulk, type: tcp, size: 5MiB, cc: cubic, sack: false, send_buffer: 4MB, receive_buffer: 6MB}
  - {name: back, type: tcp, duration: 10s, direction: down, start: 2s}
  - {name: probe, type: udp, interval: 2ms, count: 1000}
  - {name: video, type: udp, rate: 6Mbps, packet_size: 1200, duration: 25s}
variants:
  - {name: reno, set: {flows.bulk.cc: reno}}
`), Options{Sets: []string{"flows.probe.packet_size=200"}})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Runs[0]
	want := []Flow{
		{Name: "bulk", Type: "tcp", Stack: "netstack", Direction: "up", TCPOptions: hostcfg.TCPOptions{CC: "reno", SendBuffer: 4e6, ReceiveBuffer: 6e6},
			SACK: false, TCP: flows.TCPBulkSpec{Name: "bulk", Size: 5 << 20}},
		{Name: "back", Type: "tcp", Stack: "netstack", Direction: "down", SACK: true,
			TCP: flows.TCPBulkSpec{Name: "back", Start: 2 * time.Second, Duration: 10 * time.Second}},
		{Name: "probe", Type: "udp", Stack: "netstack", Direction: "up", SACK: true,
			UDP: flows.UDPSpec{Name: "probe", Interval: 2 * time.Millisecond, Count: 1000, PacketSize: 200}},
		{Name: "video", Type: "udp", Stack: "netstack", Direction: "up", SACK: true,
			UDP: flows.UDPSpec{Name: "video", Rate: 6e6, PacketSize: 1200, Duration: 25 * time.Second}},
	}
	if !reflect.DeepEqual(s.Flows, want) {
		t.Fatalf("flows\n%+v\nwant\n%+v", s.Flows, want)
	}
	if s.SampleInterval != 50*time.Millisecond {
		t.Fatalf("sample interval %v", s.SampleInterval)
	}
}

func TestWiFi(t *testing.T) {
	p, err := Parse("x.yaml", []byte(`
wifi:
  standard: 802.11a
  rate: 24Mbps
  rts_threshold: 500
  stations:
    - {name: laptop}
    - {rate: 6Mbps, frame_error_rate: 1%}
flows:
  - {name: bulk, type: tcp, size: 1MB, station: laptop}
  - {name: call, type: udp, interval: 20ms, count: 10, station: sta2}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := p.Runs[0].WiFi
	want := &wifi.Config{Standard: "802.11a", Rate: 24e6, RTSThreshold: 500,
		Stations: []wifi.StationConfig{{Name: "laptop"}, {Name: "sta2", Rate: 6e6, FrameErrorRate: 0.01}}}
	if !reflect.DeepEqual(w, want) {
		t.Fatalf("wifi %+v, want %+v", w, want)
	}
	if p.Runs[0].Flows[1].Station != "sta2" || w.Station("sta2") != 1 {
		t.Fatalf("flows %+v", p.Runs[0].Flows)
	}
}

func TestWiFiErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"wifi: {standard: 802.11ac, stations: [{name: a}]}\n",
			`x.yaml:1: wifi.standard: "802.11ac" is not a Wi-Fi standard; did you mean "802.11a"?`},
		{"wifi: {standard: wifi6, stations: [{name: a}]}\n",
			`x.yaml:1: wifi.standard: "wifi6" is not a Wi-Fi standard (expected one of: 802.11b, 802.11a, 802.11g, 802.11n)`},
		{"wifi: {rate: 11Mbps, stations: [{name: a}]}\n",
			"x.yaml:1: wifi.rate: 11 Mbit/s is not a data rate of 802.11g (expected one of: 6, 9, 12, 18, 24, 36, 48, 54 Mbit/s)"},
		{"wifi: {}\n", "x.yaml:1: wifi.stations: a Wi-Fi cell needs at least one station"},
		{"wifi: {stations: [{name: a}]}\nflows: [{name: f, type: udp, interval: 1ms, count: 1}]\n",
			"x.yaml:2: flows.f: a flow of a scenario with a wifi cell needs a station"},
		{"flows: [{name: f, type: udp, interval: 1ms, count: 1, station: a}]\n",
			"x.yaml:1: flows.f.station: there is no wifi cell in this scenario"},
		{"wifi: {stations: [{name: a}]}\nflows: [{name: f, type: udp, interval: 1ms, count: 1, station: b}]\n",
			`x.yaml:2: flows.f.station: "b" is not a station (expected one of: a)`},
		{"wifi: {stations: [{name: a}]}\nflows:\n  - {name: f, type: tcp, size: 1MB, station: a}\n  - {name: g, type: tcp, size: 1MB, station: a, sack: false}\n",
			"x.yaml:4: flows.g.sack: the TCP flows of station a disagree on sack (a station is one host, which has SACK on or off)"},
	} {
		_, err := Parse("x.yaml", []byte(tc.src), Options{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

func TestCapture(t *testing.T) {
	p, err := Parse("x.yaml", []byte("capture: {points: [client, server, client], snaplen: 128, max_file_size: 1MB, max_files: 3}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Capture{Points: []string{"client", "server"}, Options: capture.Options{Snaplen: 128, MaxFileBytes: 1e6, MaxFiles: 3}}
	if !reflect.DeepEqual(p.Runs[0].Capture, want) {
		t.Fatalf("capture %+v", p.Runs[0].Capture)
	}
	p, err = Parse("x.yaml", []byte("capture: [server]\n"), Options{Sets: []string{"capture=[client]"}})
	if err != nil || !reflect.DeepEqual(p.Runs[0].Capture, &Capture{Points: []string{"client"}}) {
		t.Fatalf("short form: %v %+v", err, p)
	}
	_, err = Parse("x.yaml", []byte("capture: [middle]\n"), Options{})
	if want := `x.yaml:1: capture.points: "middle" is not a capture point (expected one of: client, server)`; err == nil || err.Error() != want {
		t.Fatalf("got %v", err)
	}
}

// TestTrace reads a trace relative to the scenario's folder, in every
// form, and reports each mistake at its key.
func TestTrace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tracePath := write("lte.down", "# comment\n1\n1\n4\n")
	write("bad.down", "1\n3\n2\n")
	file := write("s.yaml", "link:\n  downlink:\n    rate: {trace: lte.down, trace_bytes: 1500, packet_overhead: 4}\n")
	p, err := Load(file, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Runs[0].Downlink.Rate
	if r.Trace == nil || len(r.Trace.Times) != 3 || r.Trace.Bytes != 1500 || r.Trace.File != tracePath || r.PacketOverhead != 4 || r.Bitrate != 0 || !r.Limited() {
		t.Fatalf("rate %+v, want the 3 opportunities of %s, 1500 bytes each", r, tracePath)
	}
	if p.Runs[0].Uplink.Rate.Limited() {
		t.Error("the uplink got a rate")
	}
	// The resolved scenario names the trace by its full path, so that
	// it runs from anywhere.
	y, err := p.Runs[0].YAML()
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "copy.yaml")
	os.WriteFile(copied, y, 0o644)
	if q, err := Load(copied, Options{}); err != nil || q.Runs[0].Downlink.Rate.Trace.File != tracePath {
		t.Errorf("the resolved scenario: %v\n%s", err, y)
	}
	// On the command line, a path is the shell's: relative to the working
	// folder (here, an absolute one).
	if p, err := Load(file, Options{Sets: []string{"link.uplink.rate={trace: " + tracePath + "}"}}); err != nil || p.Runs[0].Uplink.Rate.Trace == nil {
		t.Errorf("--set a trace: %v", err)
	}

	for _, c := range []struct{ rate, want string }{
		{"{bitrate: 1Mbps, trace: lte.down}", "s.yaml:1: link.rate.trace: a link's rate is a bitrate or a trace, not both"},
		{"{bitrate: 1Mbps, trace_bytes: 100}", "s.yaml:1: link.rate.trace_bytes: needs a trace (it is what each of its delivery opportunities carries)"},
		{"{trace: lte.down, trace_bytes: 0}", "s.yaml:1: link.rate.trace_bytes: 0 is out of range"},
		{"{trace: missing.down}", "s.yaml:1: link.rate.trace: cannot read the trace: open " + filepath.Join(dir, "missing.down") + ": no such file or directory"},
		{"{trace: bad.down}", "s.yaml:1: link.rate.trace: " + filepath.Join(dir, "bad.down") + ": line 3: 2 ms comes after 3 ms: times must not decrease"},
		{`{trace: ""}`, "s.yaml:1: link.rate.trace: empty: expected the path of a trace file"},
		{"{trace: /dev/null}", "s.yaml:1: link.rate.trace: /dev/null is not a regular file"},
		{"{trace: " + dir + "}", "s.yaml:1: link.rate.trace: " + dir + " is not a regular file"},
	} {
		f := write("s.yaml", "link: {rate: "+c.rate+"}\n")
		_, err := Load(f, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rate %s: %v\nwant: %s", c.rate, err, c.want)
		}
	}
}

// TestTraceData: a trace given inline (trace_data) is read as a trace
// file is, and named by its content's hash, so that a change through
// With, which names no file, can give one, and a change that keeps it
// keeps the same trace.
func TestTraceData(t *testing.T) {
	p, err := parse("link:\n  downlink:\n    rate:\n      trace_data: |\n        # comment\n        1\n        1\n        4\n      trace_bytes: 1500\n")
	if err != nil {
		t.Fatal(err)
	}
	s := p.Runs[0]
	r := s.Downlink.Rate
	if r.Trace == nil || len(r.Trace.Times) != 3 || r.Trace.Times[2] != 4*time.Millisecond || r.Trace.Bytes != 1500 || !strings.HasPrefix(r.Trace.File, "inline:") || !r.Limited() {
		t.Fatalf("rate %+v, want the 3 opportunities given, 1500 bytes each", r)
	}
	next, err := s.With(`link.uplink.rate={trace_data: "5\n10\n"}`, "link.downlink.loss=1%")
	if err != nil {
		t.Fatal(err)
	}
	if u := next.Uplink.Rate.Trace; u == nil || len(u.Times) != 2 || u.Same(r.Trace) {
		t.Errorf("a change's inline trace: %+v", u)
	}
	if !next.Downlink.Rate.Trace.Same(r.Trace) {
		t.Errorf("a change of the loss made the downlink's trace %q another than %q", next.Downlink.Rate.Trace.File, r.Trace.File)
	}
	for _, c := range []struct{ rate, want string }{
		{`{trace_data: ""}`, "x.yaml:1: link.rate.trace_data: empty: expected a trace's content (mahimahi's format: one delivery time in ms per line)"},
		{`{trace_data: "1\n3\n2\n"}`, "x.yaml:1: link.rate.trace_data: line 3: 2 ms comes after 3 ms: times must not decrease"},
		{`{trace_data: "# only a comment\n"}`, "x.yaml:1: link.rate.trace_data: a trace needs at least one delivery opportunity"},
		{`{trace_data: "5", trace: x.down}`, "x.yaml:1: link.rate.trace_data: a trace is a file (trace) or its content (trace_data), not both"},
		{`{trace_data: "5", bitrate: 1Mbps}`, "x.yaml:1: link.rate.trace_data: a link's rate is a bitrate or a trace, not both"},
		{`{trace_data: [1, 2]}`, "x.yaml:1: link.rate.trace_data: expected text, got"},
	} {
		_, err := parse("link: {rate: " + c.rate + "}\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rate %s: %v\nwant: %s", c.rate, err, c.want)
		}
	}
}

// TestShadowedSets checks the warning for a --set of a shared link key
// that a direction's own key replaces, and its absence where the --set
// does take effect.
func TestShadowedSets(t *testing.T) {
	const src = `
link:
  loss: 1%
  delay: {time: 10ms}
  uplink: {loss: 0.5%, delay: {time: 20ms}}
  downlink: {delay: 30ms}
variants:
  - name: a
  - name: b
    set: {link.downlink.loss: 2%}
`
	tests := []struct {
		sets []string
		want []string
	}{
		{[]string{"link.loss=0%"}, []string{
			"--set link.loss changes nothing for the uplink: link.uplink.loss (from the file) replaces the shared link.loss as a whole; set link.uplink.loss instead",
			"--set link.loss changes nothing for the uplink and the downlink: link.uplink.loss (from the file) and link.downlink.loss (from variant b) replace the shared link.loss as a whole; set link.uplink.loss and link.downlink.loss instead",
		}},
		{[]string{"link.delay.jitter=2ms"}, []string{
			"--set link.delay.jitter changes nothing for the uplink and the downlink: link.uplink.delay (from the file) and link.downlink.delay (from the file) replace the shared link.delay as a whole; set link.uplink.delay.jitter and link.downlink.delay.jitter instead",
		}},
		{[]string{"link.uplink.loss=0%", "link.rate=10Mbps", "duration=5s"}, nil},
	}
	for _, tt := range tests {
		p, err := parse(src, tt.sets...)
		if err != nil {
			t.Fatalf("%v: %v", tt.sets, err)
		}
		if !slices.Equal(p.Warnings, tt.want) {
			t.Errorf("%v: warnings\n%q\nwant\n%q", tt.sets, p.Warnings, tt.want)
		}
	}
	// With the override in the direction, the run takes it.
	p, err := parse(src, "link.uplink.loss=0%")
	if err != nil {
		t.Fatal(err)
	}
	if l := p.Runs[0].Uplink.Loss; l.P != 0 {
		t.Errorf("uplink loss %+v after --set link.uplink.loss=0%%, want 0", l)
	}
}

// TestVariantsBounded parses a file whose variants together would hold
// millions of YAML nodes (400 variants of a file of 2000 flows, built with
// aliases as a user would): Parse stops at the limit with an error naming
// the variant and the limit, having allocated a bounded amount.
func TestVariantsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: big\nduration: 1s\nflows:\n")
	for i := range 2000 {
		if i == 0 {
			fmt.Fprintf(&b, "  - {name: f%d, type: udp, count: &n 10, interval: &i 10ms}\n", i)
		} else {
			fmt.Fprintf(&b, "  - {name: f%d, type: udp, count: *n, interval: *i}\n", i)
		}
	}
	b.WriteString("variants:\n")
	for i := range 400 {
		fmt.Fprintf(&b, "  - {name: v%d, set: {seed: %d}}\n", i, i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := parse(b.String())
	runtime.ReadMemStats(&after)
	want := regexp.MustCompile(`^x\.yaml:2[0-9]{3}: variants\.v[0-9]+: the runs expand to [0-9]+ YAML nodes once this variant is added, over the limit of 524288 for all runs together \(variant [0-9]+ of 400\); use fewer variants, a smaller file or fewer aliases$`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Errorf("Parse error: %v\nwant one matching %s", err, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 512<<20 {
		t.Errorf("Parse allocated %d MiB, want at most 512", alloc>>20)
	}
}

// TestFlowSACKErrorLine checks that a station's SACK disagreement names
// the line of the flow that disagrees, also after a list item that is not
// a flow (it named the line of the flow before).
func TestFlowSACKErrorLine(t *testing.T) {
	_, err := parse("wifi: {stations: [{name: a}]}\nflows:\n  - x\n  - {name: n, type: tcp, size: 1MB, station: a, sack: false}\n  - {name: m, type: tcp, size: 1MB, station: a}\n")
	want := `x.yaml:3: flows[0]: expected a mapping of flow keys, got the string "x"
x.yaml:5: flows.m.sack: the TCP flows of station a disagree on sack (a station is one host, which has SACK on or off)`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

// Options.Variants resolves only the variants it names: the problems of
// the others are not errors, and an unknown name is.
func TestOptionsVariants(t *testing.T) {
	src := "clock: virtual\nvariants:\n  - {name: lab, set: {link.delay: 5ms}}\n  - {name: kernel, set: {tun: {}}}\n"
	if _, err := Parse("x.yaml", []byte(src), Options{}); err == nil {
		t.Fatal("all variants: no error for the tun variant under clock: virtual")
	}
	p, err := Parse("x.yaml", []byte(src), Options{Variants: []string{"lab"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != 1 || p.Runs[0].Variant != "lab" || p.Runs[0].Clock != ClockVirtual {
		t.Errorf("runs %+v", p.Runs)
	}
	for _, c := range []struct{ src, variant, want string }{
		{src, "kernal", `--variant: x.yaml has no variant "kernal" (it has: lab, kernel)`},
		{"duration: 1s\n", "lab", "--variant: x.yaml has no variants"},
	} {
		_, err := Parse("x.yaml", []byte(c.src), Options{Variants: []string{c.variant}})
		if err == nil || err.Error() != c.want {
			t.Errorf("--variant %s: error %v, want %q", c.variant, err, c.want)
		}
	}
}

// TestErrorsBounded: the text of many problems lists the first
// maxErrorLines and says how many more there are.
func TestErrorsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("flows:\n")
	for i := range 200 {
		fmt.Fprintf(&b, "  - {name: f%d, type: udp, interval: 2ms, count: 3, bogus: 1}\n", i)
	}
	_, err := parse(b.String())
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrorLines+1 || lines[maxErrorLines] != "... and 150 more" {
		t.Errorf("%d lines, the last %q; want %d and ... and 150 more", len(lines), lines[len(lines)-1], maxErrorLines+1)
	}
}
