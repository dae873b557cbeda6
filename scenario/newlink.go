package scenario

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/impair"
)

// A one-link scenario from Go values (package netjam's Link), without a
// file: NewLink checks the values with the decoder's ranges and messages
// (decode.go, direction.go) and fills the defaults the decoder fills
// (schema.go), and writes the tree a file of the same scenario would
// have, so that With, YAML and Value, which work on the tree, work on
// it as on a parsed one.

// LinkConfig is a scenario of one link given as Go values: what a file's
// name, seed, mtu and link keys say.
type LinkConfig struct {
	// Name is the scenario's name; "" is DefaultLink.
	Name string
	// Link is the impairment of both directions, the value a file's
	// link keys decode into. A field that impair reads as "0: the
	// default" takes the file's default: a drop-tail queue of
	// impair.DefaultQueueLimit packets when neither queue limit is set,
	// the discipline's values of the RFCs (fq_codel's quantum is the mtu
	// and an Ethernet header), a reorder gap of 1, an in-flight limit of
	// impair.DefaultInflightLimit (so a PIE queue's max_burst of 0, which
	// a file may give, is 150ms here). Name, Seed, InflightBytes and
	// InputLimit are the emulator's to set and must be zero, and so must
	// Rate.Trace: a trace is a file's (rate: {trace: FILE}).
	Link impair.Config
	// Uplink and Downlink, when not nil, replace Link for one direction,
	// as a whole: the file has under link.uplink (link.downlink) each
	// key in which the direction differs from Link. A direction without
	// loss under a Link with loss has a random loss of 0%, which is how
	// a file says it (loss: 0).
	Uplink, Downlink *impair.Config
	// MTU is the largest packet on the path, 576 to 65535; 0 is 1500.
	MTU int
	// Seed seeds every random decision of the run when SeedSet;
	// otherwise the emulator picks one (see Scenario.SeedSet).
	Seed    uint64
	SeedSet bool
}

// NewLink returns the scenario of c: its link as DefaultLink on the
// default path, every other key at its default, as a file with c's
// values gives it. Each value is checked as a file's is, with a file's
// message, which names the key that holds it in the scenario's YAML:
// link.KEY for Link's (checked even when Uplink and Downlink replace
// it), link.uplink.KEY and link.downlink.KEY for theirs ("link.loss: 1.5
// is out of range (expected 0% to 100%)"). The error is an Errors value
// of every problem; its Errors have no File or Line.
func NewLink(c LinkConfig) (*Scenario, error) {
	var b linkBuilder
	s := scenarioDefaults(cmp.Or(c.Name, DefaultLink))
	if why := nameProblem(s.Name); why != "" {
		b.errorf("name", "%s is not a valid name (%s)", quote(s.Name), why)
	}
	mtuOK := true
	if c.MTU != 0 {
		if mtuOK = b.integer("mtu", int64(c.MTU), minMTU, maxMTU); mtuOK {
			s.MTU = c.MTU
		}
	}
	s.Seed, s.SeedSet = c.Seed, c.SeedSet
	shared := withDefaults(c.Link, s.MTU)
	up, down := &shared, &shared
	if c.Uplink != nil {
		u := withDefaults(*c.Uplink, s.MTU)
		up = &u
	}
	if c.Downlink != nil {
		d := withDefaults(*c.Downlink, s.MTU)
		down = &d
	}
	link := b.link(&shared, up, down, s.MTU, mtuOK)
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	s.Uplink, s.Downlink = *up, *down
	s.Links = []Link{{Name: DefaultLink, Uplink: s.Uplink, Downlink: s.Downlink}}
	s.Paths = []Path{{Name: DefaultPath, Via: []string{DefaultLink}}}
	s.tree = mappingNode()
	put(s.tree, "name", stringNode(s.Name))
	if s.SeedSet {
		put(s.tree, "seed", plainNode(strconv.FormatUint(s.Seed, 10)))
	}
	if c.MTU != 0 {
		put(s.tree, "mtu", intNode(int64(s.MTU)))
	}
	put(s.tree, "link", link)
	s.traceFiles = map[string][]time.Duration{}
	return s, nil
}

// withDefaults returns c with the defaults a file's direction has where
// c has the zero that impair reads as "the default".
func withDefaults(c impair.Config, mtu int) impair.Config {
	def := directionDefaults()
	if c.Reorder.Gap == 0 {
		c.Reorder.Gap = def.Reorder.Gap
	}
	if c.InflightLimit == 0 {
		c.InflightLimit = def.InflightLimit
	}
	q, dq := &c.Queue, queueDefaults(c.Queue.Discipline, mtu)
	if q.LimitPackets == 0 && q.LimitBytes == 0 {
		q.LimitPackets = dq.LimitPackets
	}
	// A discipline's own settings only: the others' are 0 in dq.
	fill(&q.Target, dq.Target)
	fill(&q.Interval, dq.Interval)
	fill(&q.Flows, dq.Flows)
	fill(&q.Quantum, dq.Quantum)
	fill(&q.TUpdate, dq.TUpdate)
	fill(&q.Alpha, dq.Alpha)
	fill(&q.Beta, dq.Beta)
	fill(&q.MaxBurst, dq.MaxBurst)
	return c
}

// fill sets *v to def when it is 0.
func fill[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// linkBuilder checks the values of a LinkConfig and writes their tree.
type linkBuilder struct {
	errs Errors
}

// errorf reports a problem with the value at path.
func (b *linkBuilder) errorf(path, format string, args ...any) {
	b.errs = append(b.errs, &Error{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// directionBuilders build the node of each direction key (nil: the key's
// default) from a direction, in the order of directionKeys, checking its
// values; same reports whether two directions have the same value, zero
// is how a direction's own key says the default.
var directionBuilders = []struct {
	key  string
	same func(a, b *impair.Config) bool
	node func(b *linkBuilder, path string, c *impair.Config, mtu int, mtuOK bool) *yaml.Node
	zero string
}{
	{"delay", func(a, b *impair.Config) bool { return same(a.Delay, b.Delay) }, (*linkBuilder).delay, "0s"},
	{"loss", func(a, b *impair.Config) bool { return same(a.Loss, b.Loss) }, (*linkBuilder).loss, "0"},
	{"duplicate", func(a, b *impair.Config) bool { return same(a.Duplicate, b.Duplicate) }, (*linkBuilder).duplicate, "0"},
	{"corrupt", func(a, b *impair.Config) bool { return same(a.Corrupt, b.Corrupt) }, (*linkBuilder).corrupt, "0"},
	{"reorder", func(a, b *impair.Config) bool { return same(a.Reorder, b.Reorder) }, (*linkBuilder).reorder, "0"},
	{"rate", func(a, b *impair.Config) bool { return same(a.Rate, b.Rate) }, (*linkBuilder).rate, "unlimited"},
	{"slot", func(a, b *impair.Config) bool { return same(a.Slot, b.Slot) }, (*linkBuilder).slot, "0s"},
	{"queue", func(a, b *impair.Config) bool { return same(a.Queue, b.Queue) }, (*linkBuilder).queue, strconv.Itoa(impair.DefaultQueueLimit)},
	{"inflight_limit", func(a, b *impair.Config) bool { return a.InflightLimit == b.InflightLimit }, (*linkBuilder).inflightLimit,
		strconv.Itoa(impair.DefaultInflightLimit)},
}

// same reports whether x and y are the same value, a NaN the same as a
// NaN: a bad value a direction has from Link is Link's problem only.
func same[T comparable](x, y T) bool {
	return x == y || fmt.Sprintf("%#v", x) == fmt.Sprintf("%#v", y)
}

// link checks the link's directions and returns its mapping: shared's
// keys, then those of up and down that are not shared, each under its
// direction's own mapping (link.uplink.loss), as decoder.direction reads
// them. A direction that replaces shared has its own key wherever it
// differs from it, and says its default there (delay: 0s) where shared
// has a value. A direction without loss under a shared loss then has
// the file's loss: 0, a random loss of 0.
func (b *linkBuilder) link(shared, up, down *impair.Config, mtu int, mtuOK bool) *yaml.Node {
	link, valid := b.direction("link", shared, nil, nil, mtu, mtuOK)
	for _, d := range []struct {
		name string
		c    *impair.Config
	}{{"uplink", up}, {"downlink", down}} {
		if d.c == shared {
			continue
		}
		if own, _ := b.direction("link."+d.name, d.c, shared, valid, mtu, mtuOK); len(own.Content) > 0 {
			put(link, d.name, own)
		}
		if d.c.Loss.Model == impair.LossNone && shared.Loss.Model != impair.LossNone {
			d.c.Loss = impair.LossConfig{Model: impair.LossRandom}
		}
	}
	return link
}

// direction checks c, the direction at path (link, link.uplink), and
// returns its mapping and the keys whose values are valid. With shared
// (nil: none), whose valid keys are sharedValid, the mapping has the
// keys in which c differs from shared only, and checks only them: a
// default is no key, or says so (zero) under a shared value.
func (b *linkBuilder) direction(path string, c, shared *impair.Config, sharedValid map[string]bool, mtu int, mtuOK bool) (*yaml.Node, map[string]bool) {
	m := mappingNode()
	valid := map[string]bool{}
	for _, k := range directionBuilders {
		if shared != nil && k.same(c, shared) {
			valid[k.key] = sharedValid[k.key]
			continue
		}
		before := len(b.errs)
		n := k.node(b, path+"."+k.key, c, mtu, mtuOK)
		valid[k.key] = len(b.errs) == before
		if n == nil && shared != nil {
			n = plainNode(k.zero)
		}
		put(m, k.key, n)
	}
	b.emulatorFields(path, c)
	if valid["delay"] && valid["reorder"] && lacksDelay(*c) {
		b.errorf(path+".reorder", "%s", reorderNeedsDelay)
	}
	return m, valid
}

// emulatorFields refuses the fields of direction c, at path, that the
// emulator sets: a file has no key for them, and they would be lost.
func (b *linkBuilder) emulatorFields(path string, c *impair.Config) {
	for _, f := range []struct {
		name string
		set  bool
	}{{"Name", c.Name != ""}, {"Seed", c.Seed != 0}, {"InflightBytes", c.InflightBytes != 0}, {"InputLimit", c.InputLimit != 0}} {
		if f.set {
			b.errorf(path, "%s is the emulator's to set, not a scenario's: leave it zero", f.name)
		}
	}
}

// delay checks and writes c.Delay: a duration, or the mapping form.
func (b *linkBuilder) delay(path string, c *impair.Config, _ int, _ bool) *yaml.Node {
	v := c.Delay
	switch {
	case v == impair.DelayConfig{}:
		return nil
	case v == impair.DelayConfig{Time: v.Time}:
		b.duration(path, v.Time, false, maxDelay)
		return durationNode(v.Time)
	}
	m := mappingNode()
	if v.Time != 0 {
		b.duration(join(path, "time"), v.Time, false, maxDelay)
		put(m, "time", durationNode(v.Time))
	}
	jitterOK := true
	if v.Jitter != 0 {
		jitterOK = b.duration(join(path, "jitter"), v.Jitter, false, maxDelay)
		put(m, "jitter", durationNode(v.Jitter))
	}
	if v.Distribution != impair.Uniform {
		p := join(path, "distribution")
		if v.Distribution > impair.ParetoNormal {
			b.errorf(p, "%s", notOneOf(v.Distribution.String(), "distribution", words(impair.Uniform, impair.ParetoNormal)))
		} else if msg := shapesNothing(v.Distribution, v.Jitter); jitterOK && msg != "" {
			b.errorf(p, "%s", msg)
		}
		put(m, "distribution", plainNode(v.Distribution.String()))
	}
	if v.Correlation != 0 {
		b.correlation(join(path, "correlation"), v.Correlation)
		put(m, "correlation", ratioNode(v.Correlation))
	}
	if v.AllowReorder {
		put(m, "allow_reorder", plainNode("true"))
	}
	return m
}

// loss checks and writes c.Loss: a ratio (random loss), or the mapping
// form with every key of its model, so that no default of the decoder's
// (a gemodel's r is 1-p) applies.
func (b *linkBuilder) loss(path string, c *impair.Config, _ int, _ bool) *yaml.Node {
	v := c.Loss
	keys := []struct {
		name   string
		v      float64
		always bool // written even when 0, its default being another value
	}{
		{"p", v.P, true}, {"correlation", v.Correlation, false}, {"r", v.R, true}, {"1-h", v.OneMinusH, true}, {"1-k", v.OneMinusK, false},
		{"p13", v.P13, true}, {"p31", v.P31, true}, {"p32", v.P32, false}, {"p23", v.P23, true}, {"p14", v.P14, false},
	}
	if v.Model > impair.LossState {
		b.errorf(join(path, "model"), "%s", notOneOf(v.Model.String(), "loss model", words(impair.LossNone, impair.LossState)))
		return nil
	}
	if only := (impair.LossConfig{Model: v.Model, P: v.P}); v.Model == impair.LossRandom && same(v, only) {
		b.ratio(path, v.P)
		return ratioNode(v.P)
	}
	m := mappingNode()
	if v.Model != impair.LossRandom && v.Model != impair.LossNone {
		put(m, "model", plainNode(v.Model.String()))
	}
	before := len(b.errs)
	for _, k := range keys {
		p := join(path, k.name)
		switch of := slices.Contains(lossKeyModels[k.name], v.Model.String()); {
		case !of && k.v != 0:
			b.errorf(p, "%s", notOfModel(k.name, v.Model))
		case !of:
		case k.name == "correlation":
			b.correlation(p, k.v)
			put(m, k.name, ratioNode(k.v))
		case k.always || k.v != 0:
			b.ratio(p, k.v)
			put(m, k.name, ratioNode(k.v))
		}
	}
	if v.Model == impair.LossState && len(b.errs) == before {
		for _, msg := range stateSums(v) {
			b.errorf(path, "%s", msg)
		}
	}
	if v.Model == impair.LossNone {
		return nil
	}
	return m
}

// duplicate checks and writes c.Duplicate.
func (b *linkBuilder) duplicate(path string, c *impair.Config, _ int, _ bool) *yaml.Node {
	return b.chance(path, c.Duplicate)
}

// corrupt checks and writes c.Corrupt.
func (b *linkBuilder) corrupt(path string, c *impair.Config, _ int, _ bool) *yaml.Node {
	return b.chance(path, c.Corrupt)
}

// chance checks and writes a chance: a ratio, or {p, correlation}.
func (b *linkBuilder) chance(path string, v impair.Chance) *yaml.Node {
	switch {
	case v == impair.Chance{}:
		return nil
	case v.Correlation == 0:
		b.ratio(path, v.P)
		return ratioNode(v.P)
	}
	b.ratio(join(path, "p"), v.P)
	b.correlation(join(path, "correlation"), v.Correlation)
	m := mappingNode()
	put(m, "p", ratioNode(v.P))
	put(m, "correlation", ratioNode(v.Correlation))
	return m
}

// reorder checks and writes c.Reorder: a ratio, or {p, correlation, gap}.
func (b *linkBuilder) reorder(path string, c *impair.Config, _ int, _ bool) *yaml.Node {
	v, def := c.Reorder, directionDefaults().Reorder
	switch {
	case v == def:
		return nil
	case v.Correlation == 0 && v.Gap == def.Gap:
		b.ratio(path, v.P)
		return ratioNode(v.P)
	}
	b.ratio(join(path, "p"), v.P)
	m := mappingNode()
	put(m, "p", ratioNode(v.P))
	if v.Correlation != 0 {
		b.correlation(join(path, "correlation"), v.Correlation)
		put(m, "correlation", ratioNode(v.Correlation))
	}
	if v.Gap != def.Gap {
		b.integer(join(path, "gap"), int64(v.Gap), 1, maxPackets)
		put(m, "gap", intNode(int64(v.Gap)))
	}
	return m
}

// rate checks and writes c.Rate: a rate, or {bitrate, packet_overhead,
// cell_size, cell_overhead}.
func (b *linkBuilder) rate(path string, c *impair.Config, _ int, _ bool) *yaml.Node {
	v := c.Rate
	if v.Trace != nil {
		b.errorf(join(path, "trace"), "a trace is a scenario file's (rate: {trace: FILE}): give a bitrate")
	}
	bitratePath := path
	if v != (impair.RateConfig{Bitrate: v.Bitrate, Trace: v.Trace}) {
		bitratePath = join(path, "bitrate")
	}
	if v.Bitrate > MaxRate {
		b.errorf(bitratePath, "%s", rateTooHigh(FormatRate(v.Bitrate)))
	}
	switch {
	case v == impair.RateConfig{}:
		return nil
	case bitratePath == path:
		return plainNode(FormatRate(v.Bitrate))
	}
	m := mappingNode()
	put(m, "bitrate", plainNode(FormatRate(v.Bitrate)))
	if v.PacketOverhead != 0 {
		b.integer(join(path, "packet_overhead"), int64(v.PacketOverhead), -1500, 1500)
		put(m, "packet_overhead", intNode(int64(v.PacketOverhead)))
	}
	if v.CellSize != 0 {
		b.integer(join(path, "cell_size"), int64(v.CellSize), 0, 65535)
		put(m, "cell_size", intNode(int64(v.CellSize)))
	}
	if v.CellOverhead != 0 {
		p := join(path, "cell_overhead")
		if b.integer(p, int64(v.CellOverhead), 0, 1500) && v.CellOverhead > 0 && v.CellSize == 0 {
			b.errorf(p, "%s", overheadNeedsCells)
		}
		put(m, "cell_overhead", intNode(int64(v.CellOverhead)))
	}
	return m
}

// slot checks and writes c.Slot: a duration (min = max), or {min, max,
// packets, bytes}.
func (b *linkBuilder) slot(path string, c *impair.Config, _ int, _ bool) *yaml.Node {
	v := c.Slot
	switch {
	case v == impair.SlotConfig{}:
		return nil
	case v == impair.SlotConfig{Min: v.Min, Max: v.Min}:
		b.duration(path, v.Min, false, maxDelay)
		return durationNode(v.Min)
	}
	before := len(b.errs)
	m := mappingNode()
	if v.Min != 0 {
		b.duration(join(path, "min"), v.Min, false, maxDelay)
		put(m, "min", durationNode(v.Min))
	}
	if v.Max != v.Min {
		b.duration(join(path, "max"), v.Max, false, maxDelay)
		put(m, "max", durationNode(v.Max))
	}
	if v.Packets != 0 {
		b.integer(join(path, "packets"), int64(v.Packets), 0, maxPackets)
		put(m, "packets", intNode(int64(v.Packets)))
	}
	if v.Bytes != 0 {
		b.size(join(path, "bytes"), v.Bytes, 0, maxBytes)
		put(m, "bytes", sizeNode(v.Bytes))
	}
	if len(b.errs) == before {
		switch {
		case v.Max < v.Min:
			b.errorf(join(path, "max"), "%s", maxBelowMin(formatDuration(v.Max), v.Min))
		case v.Max == 0 && (v.Packets > 0 || v.Bytes > 0):
			b.errorf(path, "%s", slotsNeeded)
		}
	}
	return m
}

// queue checks and writes c.Queue, whose defaults are filled: a packet
// limit, a byte limit, or the mapping form with the keys that differ from
// the discipline's defaults.
func (b *linkBuilder) queue(path string, c *impair.Config, mtu int, mtuOK bool) *yaml.Node {
	v := c.Queue
	if v.Discipline > impair.PIE {
		b.errorf(join(path, "discipline"), "%s", notOneOf(v.Discipline.String(), "queue discipline", words(impair.DropTail, impair.PIE)))
		return nil
	}
	if v == queueDefaults(impair.DropTail, mtu) {
		return nil
	}
	def := queueDefaults(v.Discipline, mtu)
	own := []ownKey{
		{"ecn", v.ECN, v.ECN != def.ECN, nil, func() *yaml.Node { return plainNode("true") }},
		{"target", v.Target != 0, v.Target != def.Target, b.positive(v.Target), func() *yaml.Node { return durationNode(v.Target) }},
		{"interval", v.Interval != 0, v.Interval != def.Interval, b.positive(v.Interval), func() *yaml.Node { return durationNode(v.Interval) }},
		{"flows", v.Flows != 0, v.Flows != def.Flows, b.inRange(v.Flows, 65536), func() *yaml.Node { return intNode(int64(v.Flows)) }},
		{"quantum", v.Quantum != 0, v.Quantum != def.Quantum, b.inRange(v.Quantum, maxPackets), func() *yaml.Node { return intNode(int64(v.Quantum)) }},
		{"tupdate", v.TUpdate != 0, v.TUpdate != def.TUpdate, b.positive(v.TUpdate), func() *yaml.Node { return durationNode(v.TUpdate) }},
		{"alpha", v.Alpha != 0, v.Alpha != def.Alpha, b.factor(v.Alpha), func() *yaml.Node { return ratioNode(v.Alpha) }},
		{"beta", v.Beta != 0, v.Beta != def.Beta, b.factor(v.Beta), func() *yaml.Node { return ratioNode(v.Beta) }},
		{"max_burst", v.MaxBurst != 0, v.MaxBurst != def.MaxBurst, func(p string) bool { return b.duration(p, v.MaxBurst, false, maxDelay) },
			func() *yaml.Node { return durationNode(v.MaxBurst) }},
	}
	// A drop-tail queue of one limit is that limit (queue: 50).
	plain := v.Discipline == impair.DropTail && !slices.ContainsFunc(own, func(k ownKey) bool { return k.set })
	switch {
	case plain && v.LimitBytes == 0:
		b.integer(path, int64(v.LimitPackets), 1, maxPackets)
		return intNode(int64(v.LimitPackets))
	case plain && v.LimitPackets == 0:
		if b.size(path, v.LimitBytes, 1, maxBytes) && mtuOK && v.LimitBytes < int64(mtu) {
			b.errorf(path, "%s", belowMTU(sizeText(v.LimitBytes), mtu))
		}
		return sizeNode(v.LimitBytes)
	}
	m := mappingNode()
	if v.Discipline != impair.DropTail {
		put(m, "discipline", plainNode(v.Discipline.String()))
	}
	if v.LimitPackets != def.LimitPackets || v.LimitBytes != 0 {
		if v.LimitPackets != 0 {
			b.integer(join(path, "limit"), int64(v.LimitPackets), 1, maxPackets)
			put(m, "limit", intNode(int64(v.LimitPackets)))
		}
		if v.LimitBytes != 0 {
			p := join(path, "bytes")
			if b.size(p, v.LimitBytes, 1, maxBytes) && mtuOK && v.LimitBytes < int64(mtu) {
				b.errorf(p, "%s", belowMTU(sizeText(v.LimitBytes), mtu))
			}
			put(m, "bytes", sizeNode(v.LimitBytes))
		}
	}
	for _, k := range own {
		p := join(path, k.key)
		switch ds := queueKeyDisciplines[k.key]; {
		case k.set && ds != nil && !slices.Contains(ds, v.Discipline.String()):
			b.errorf(p, "%s", notOfDiscipline(k.key, v.Discipline))
		case k.differ:
			if k.check != nil {
				k.check(p)
			}
			put(m, k.key, k.node())
		}
	}
	return m
}

// ownKey is a key of the settings of some queue disciplines only: whether
// its value is set (not 0) and differs from the discipline's default, its
// check (nil: none) and its node.
type ownKey struct {
	key         string
	set, differ bool
	check       func(path string) bool
	node        func() *yaml.Node
}

// positive returns the check of v, a duration of a queue's that must be
// more than 0 (a zero is its default).
func (b *linkBuilder) positive(v time.Duration) func(string) bool {
	return func(p string) bool { return b.duration(p, v, true, maxDelay) }
}

// inRange returns the check of v, a count of a queue's from 1 to hi.
func (b *linkBuilder) inRange(v, hi int) func(string) bool {
	return func(p string) bool { return b.integer(p, int64(v), 1, int64(hi)) }
}

// factor returns the check of v, one of PIE's factors, 0 to 32.
func (b *linkBuilder) factor(v float64) func(string) bool {
	return func(p string) bool { return b.number(p, v, 0, 32) }
}

// inflightLimit checks and writes c.InflightLimit.
func (b *linkBuilder) inflightLimit(path string, c *impair.Config, _ int, _ bool) *yaml.Node {
	if c.InflightLimit == directionDefaults().InflightLimit {
		return nil
	}
	b.integer(path, int64(c.InflightLimit), 1, maxPackets)
	return intNode(int64(c.InflightLimit))
}

// The checks of values, each reporting whether v is valid and, if not,
// why, as the decoder does for the value written as Go writes it.

func (b *linkBuilder) duration(path string, v time.Duration, positive bool, max time.Duration) bool {
	return b.inside(path, formatDuration(v))(durationRange(v, positive, max))
}

func (b *linkBuilder) ratio(path string, v float64) bool {
	return b.inside(path, floatText(v))(ratioRange(v))
}

func (b *linkBuilder) correlation(path string, v float64) bool {
	return b.inside(path, floatText(v))(correlationRange(v))
}

func (b *linkBuilder) integer(path string, v, lo, hi int64) bool {
	return b.inside(path, strconv.FormatInt(v, 10))(integerRange(v, lo, hi))
}

func (b *linkBuilder) size(path string, v, lo, hi int64) bool {
	return b.inside(path, sizeText(v))(sizeRange(v, lo, hi))
}

func (b *linkBuilder) number(path string, v, lo, hi float64) bool {
	return b.inside(path, floatText(v))(numberRange(v, lo, hi))
}

// inside returns the report of a range check of the value at path,
// written text: it reports the value out of range want unless ok.
func (b *linkBuilder) inside(path, text string) func(want string, ok bool) bool {
	return func(want string, ok bool) bool {
		if !ok {
			b.errorf(path, "%s", outOfRange(text, want))
		}
		return ok
	}
}

// The nodes of values, written as the parsers read them back exactly:
// a duration to the nanosecond, a float by its shortest decimal.

func floatText(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func sizeText(v int64) string { return strconv.FormatInt(v, 10) + "B" }

func plainNode(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

func durationNode(v time.Duration) *yaml.Node { return plainNode(formatDuration(v)) }

func ratioNode(v float64) *yaml.Node { return plainNode(floatText(v)) }

func intNode(v int64) *yaml.Node { return plainNode(strconv.FormatInt(v, 10)) }

func sizeNode(v int64) *yaml.Node { return plainNode(sizeText(v)) }

// mappingNode returns an empty mapping.
func mappingNode() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

// put adds key: v to mapping m, unless v is nil.
func put(m *yaml.Node, key string, v *yaml.Node) {
	if v != nil {
		m.Content = append(m.Content, stringNode(key), v)
	}
}
