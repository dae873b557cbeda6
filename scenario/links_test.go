package scenario

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
)

// TestLinkShorthand: link is one link named "link" on one default path.
func TestLinkShorthand(t *testing.T) {
	s := mustParse(t, "link: {delay: 10ms, uplink: {rate: 5Mbps}}\n")
	up := with(func(d *impair.Config) { d.Delay.Time = 10 * time.Millisecond; d.Rate.Bitrate = 5e6 })
	down := with(func(d *impair.Config) { d.Delay.Time = 10 * time.Millisecond })
	want := []Link{{Name: DefaultLink, Uplink: up, Downlink: down}}
	if !reflect.DeepEqual(s.Links, want) {
		t.Errorf("links %+v, want %+v", s.Links, want)
	}
	if p := []Path{{Name: DefaultPath, Via: []string{DefaultLink}}}; !reflect.DeepEqual(s.Paths, p) {
		t.Errorf("paths %+v, want %+v", s.Paths, p)
	}
}

// TestLinksAndPaths decodes the example: each link as link is,
// each path with its links and match, flows with their path.
func TestLinksAndPaths(t *testing.T) {
	s := mustParse(t, `
links:
  - {name: access, rate: 20Mbps, delay: 5ms, queue: {discipline: fq_codel}}
  - {name: eu, delay: 15ms, downlink: {loss: 1%}}
  - {name: us, delay: 60ms, loss: 0.5%}
paths:
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
  - {name: to-us, via: [access, us], match: {dst: 10.30.0.7, proto: udp, port: 443}}
  - {name: direct, via: [access]}
flows:
  - {name: a, type: tcp, path: to-eu, size: 1MB}
  - {name: b, type: udp, path: to-us, rate: 1Mbps, count: 10}
  - {name: c, type: tcp, size: 1MB}
`)
	access := with(func(d *impair.Config) {
		d.Rate.Bitrate, d.Delay.Time = 20e6, 5*time.Millisecond
		d.Queue = queueDefaults(impair.FQCoDel, 1500)
	})
	eu := with(func(d *impair.Config) { d.Delay.Time = 15 * time.Millisecond })
	euDown := with(func(d *impair.Config) {
		d.Delay.Time = 15 * time.Millisecond
		d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.01}
	})
	us := with(func(d *impair.Config) {
		d.Delay.Time = 60 * time.Millisecond
		d.Loss = impair.LossConfig{Model: impair.LossRandom, P: 0.005}
	})
	wantLinks := []Link{{Name: "access", Uplink: access, Downlink: access}, {Name: "eu", Uplink: eu, Downlink: euDown}, {Name: "us", Uplink: us, Downlink: us}}
	if !reflect.DeepEqual(s.Links, wantLinks) {
		t.Errorf("links\n%+v\nwant\n%+v", s.Links, wantLinks)
	}
	if s.Uplink != access || s.Downlink != access {
		t.Errorf("Uplink, Downlink are not the first link's")
	}
	wantPaths := []Path{
		{Name: "to-eu", Via: []string{"access", "eu"}, Match: &Match{Dst: netip.MustParsePrefix("10.20.0.0/16")}},
		{Name: "to-us", Via: []string{"access", "us"}, Match: &Match{Dst: netip.MustParsePrefix("10.30.0.7/32"), Proto: "udp", Port: 443}},
		{Name: "direct", Via: []string{"access"}},
	}
	if !reflect.DeepEqual(s.Paths, wantPaths) {
		t.Errorf("paths\n%+v\nwant\n%+v", s.Paths, wantPaths)
	}
	var got []string
	for _, f := range s.Flows {
		got = append(got, f.Path)
	}
	if want := []string{"to-eu", "to-us", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("flows' paths %q, want %q", got, want)
	}
}

// TestLinksInSeries: links without paths are one default path across
// them all, in order.
func TestLinksInSeries(t *testing.T) {
	s := mustParse(t, "links: [{name: a, delay: 1ms}, {name: b, delay: 2ms}]\n")
	if p := []Path{{Name: DefaultPath, Via: []string{"a", "b"}}}; !reflect.DeepEqual(s.Paths, p) {
		t.Errorf("paths %+v, want %+v", s.Paths, p)
	}
}

// TestLinksErrors: each mistake of links and paths with its file, line
// and key.
func TestLinksErrors(t *testing.T) {
	const two = "links:\n  - {name: a, delay: 1ms}\n  - {name: b}\n"
	tests := []struct{ name, src, want string }{
		{"links not a list", "links: {name: a}\n", `x.yaml:1: links: expected a list of links like [{name: access, rate: 10Mbps}], got a mapping`},
		{"paths empty", two + "paths: []\n", `x.yaml:4: paths: expected a list of paths like [{name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}], got an empty list`},
		{"unknown link in via", two + "paths:\n  - {name: p, via: [a, c]}\n  - {name: q, via: [b], match: {dst: 10.1.0.0/16}}\n",
			`x.yaml:5: paths.p.via: "c" names no link (the links: a, b)`},
		{"via typo", two + "paths:\n  - {name: p, via: [a, bb]}\n",
			`x.yaml:5: paths.p.via: "bb" names no link; did you mean "b"?`},
		{"duplicate link name", "links:\n  - {name: a}\n  - {name: a}\n",
			`x.yaml:3: links[1].name: "a" names two links (first at line 2)`},
		{"duplicate path name", two + "paths:\n  - {name: p, via: [a]}\n  - {name: p, via: [b], match: {proto: udp}}\n",
			`x.yaml:6: paths[1].name: "p" names two paths (first at line 5)`},
		{"two defaults", two + "paths:\n  - {name: p, via: [a]}\n  - {name: q, via: [b]}\n",
			"x.yaml:6: paths.q: a second default path (without match): p is one already; give one of them a match"},
		{"link and links", "link: {delay: 1ms}\nlinks: [{name: a}]\n",
			"x.yaml:2: links: link and links cannot both be set: link is the one-link shorthand; move its keys into an item of links"},
		{"identical matches", two + "paths:\n  - {name: p, via: [a], match: {dst: 10.1.0.0/16, proto: tcp}}\n  - {name: q, via: [b],\n     match: {proto: tcp, dst: 10.1.0.0/16}}\n",
			"x.yaml:7: paths.q.match: the same match as path p (line 5): a packet could take either"},
		{"empty via", two + "paths:\n  - {name: p, via: [a, b]}\n  - {name: q, via: [], match: {port: 80}}\n",
			"x.yaml:6: paths.q.via: empty: a path crosses at least one link"},
		{"no via", two + "paths:\n  - {name: p, via: [a, b]}\n  - {name: q, match: {port: 80}}\n",
			"x.yaml:6: paths.q: a path needs via: the links it crosses, in order from the client side"},
		{"link on no path", two + "paths:\n  - {name: p, via: [a]}\n",
			"x.yaml:3: links.b: no path crosses this link; add it to a path's via, or remove it"},
		{"link crossed twice", two + "paths:\n  - {name: p, via: [a, b, a]}\n",
			`x.yaml:5: paths.p.via: "a" is crossed twice: a path crosses each link once`},
		{"paths without links", "link: {delay: 1ms}\npaths: [{name: p, via: [link]}]\n",
			"x.yaml:2: paths: paths go across a links list (link is one link on one path); write the links as links: [{name: ..., ...}]"},
		{"link key error", "links:\n  - {name: a, delay: 5}\n",
			`x.yaml:2: links.a.delay: "5" is not a duration (missing unit; examples: 50ms, 250us, 1.5s)`},
		{"direction key error", "links:\n  - name: a\n    uplink: {loss: 200%}\n",
			"x.yaml:3: links.a.uplink.loss: 200% is out of range (expected 0% to 100%)"},
		{"link without name", "links:\n  - {delay: 1ms}\n",
			"x.yaml:2: links[0]: a link needs a name"},
		{"match host bits", two + "paths:\n  - {name: p, via: [a, b], match: {dst: 10.1.2.3/16}}\n",
			"x.yaml:5: paths.p.match.dst: 10.1.2.3/16 has host bits set; did you mean 10.1.0.0/16?"},
		{"match multicast", two + "paths:\n  - {name: p, via: [a, b], match: {dst: 224.0.0.0/8}}\n",
			"x.yaml:5: paths.p.match.dst: 224.0.0.0/8 is not a network of unicast hosts (multicast, loopback, link-local, broadcast and unspecified addresses cannot be a host's); take a private one such as 10.20.0.0/16 or fd20::/64"},
		{"match loopback", two + "paths:\n  - {name: p, via: [a, b], match: {dst: 127.0.0.0/8}}\n",
			"x.yaml:5: paths.p.match.dst: 127.0.0.0/8 is not a network of unicast hosts (multicast, loopback, link-local, broadcast and unspecified addresses cannot be a host's); take a private one such as 10.20.0.0/16 or fd20::/64"},
		{"match broadcast", two + "paths:\n  - {name: p, via: [a, b], match: {dst: 255.255.255.255}}\n",
			"x.yaml:5: paths.p.match.dst: 255.255.255.255 is not a network of unicast hosts (multicast, loopback, link-local, broadcast and unspecified addresses cannot be a host's); take a private one such as 10.20.0.0/16 or fd20::/64"},
		{"match unspecified v6", two + "paths:\n  - {name: p, via: [a, b], match: {dst: '::/8'}}\n",
			"x.yaml:5: paths.p.match.dst: ::/8 is not a network of unicast hosts (multicast, loopback, link-local, broadcast and unspecified addresses cannot be a host's); take a private one such as 10.20.0.0/16 or fd20::/64"},
		{"match v6 below its mtu", "mtu: 1000\n" + two + "paths:\n  - {name: p, via: [a, b], match: {dst: 'fd20::/64'}}\n",
			"x.yaml:6: paths.p.match.dst: fd20::/64 is an IPv6 network, and the mtu, 1000, is below IPv6's minimum of 1280: hosts have no IPv6 below it"},
		{"flow on an unknown path", two + "paths:\n  - {name: p, via: [a, b]}\nflows:\n  - {name: f, type: tcp, path: pp}\n",
			`x.yaml:7: flows.f.path: "pp" is not a path; did you mean "p"?`},
		{"flow without default path", two + "paths:\n  - {name: p, via: [a, b], match: {proto: tcp}}\nflows:\n  - {name: f, type: tcp}\n",
			"x.yaml:7: flows.f.path: the scenario has no default path (a path without match): name this flow's path (p)"},
		{"flow down on a port", two + "paths:\n  - {name: p, via: [a, b], match: {port: 443}}\n  - {name: q, via: [a]}\nflows:\n  - {name: f, type: tcp, path: p, direction: down, size: 1MB}\n",
			"x.yaml:8: flows.f.path: path p matches port 443, the server's: a flow down sends from a port of its own, which the path does not take; run it up, or on another path"},
		{"two flows on a port", two + "paths:\n  - {name: p, via: [a, b], match: {port: 443}}\n  - {name: q, via: [a]}\nflows:\n  - {name: f, type: tcp, path: p, size: 1MB}\n  - {name: g, type: tcp, path: p, size: 1MB}\n",
			"x.yaml:9: flows.g.path: path p matches port 443, where its tcp flow f listens already: one tcp flow per such path"},
		{"flow of another proto", two + "paths:\n  - {name: p, via: [a, b], match: {proto: tcp}}\nflows:\n  - {name: f, type: udp, path: p, rate: 1Mbps}\n",
			"x.yaml:7: flows.f.path: path p takes tcp packets only, and this is a udp flow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.src)
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			if !strings.Contains(err.Error()+"\n", tt.want+"\n") {
				t.Errorf("got\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

// TestTimelineLinks: the timeline addresses a link of the list by name
// (links.eu.delay), ramps it, and each point holds every link.
func TestTimelineLinks(t *testing.T) {
	s := mustParse(t, `
links:
  - {name: access, rate: 10Mbps}
  - {name: eu, delay: 20ms}
paths:
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
  - {name: direct, via: [access]}
timeline:
  - {at: 1s, set: {links.eu.delay: 50ms}}
  - {at: 2s, for: 1s, set: {links.access.downlink.loss: 100%}}
  - {at: 4s, ramp: 20ms, set: {links.eu.uplink.delay: 70ms}}
`)
	want := `1s links.eu.delay:"20ms"->"50ms"
2s links.access.downlink.loss:""->"100%"
3s links.access.downlink.loss:"100%"->""
4.01s links.eu.uplink.delay:"50ms"->"60ms"
4.02s links.eu.uplink.delay:"60ms"->"70ms"
`
	if got := pointsText(s.Timeline); got != want {
		t.Fatalf("timeline:\n%s\nwant:\n%s", got, want)
	}
	p := s.Timeline[1]
	if len(p.Links) != 2 || p.Links[1].Uplink.Delay.Time != 50*time.Millisecond || p.Links[0].Downlink.Loss.P != 1 ||
		p.Links[0].Uplink.Loss.P != 0 || p.Links[0].Uplink.Rate.Bitrate != 10e6 {
		t.Errorf("at 2s: %+v", p.Links)
	}
	if p.Uplink != p.Links[0].Uplink || p.Downlink != p.Links[0].Downlink {
		t.Errorf("at 2s: Uplink, Downlink are not the first link's")
	}
	if last := s.Timeline[4].Links[1]; last.Uplink.Delay.Time != 70*time.Millisecond || last.Downlink.Delay.Time != 50*time.Millisecond {
		t.Errorf("at 4.02s: eu %+v", last)
	}
}

// TestTimelineLinksErrors: a key of a link that is not there, or of the
// other form (link. with a links list, links. without).
func TestTimelineLinksErrors(t *testing.T) {
	const links = "links:\n  - {name: a, delay: 1ms}\n  - {name: b}\n"
	tests := []struct{ src, want string }{
		{links + "timeline:\n  - {at: 1s, set: {links.c.delay: 5ms}}\n",
			`x.yaml:5: timeline[0].set.links.c.delay: "c" names no link (the links: a, b)`},
		{links + "timeline:\n  - {at: 1s, set: {link.delay: 5ms}}\n",
			"x.yaml:5: timeline[0].set.link.delay: this scenario has a links list: address a link by its name (links.NAME.delay)"},
		{"link: {delay: 1ms}\ntimeline:\n  - {at: 1s, set: {links.link.delay: 5ms}}\n",
			"x.yaml:3: timeline[0].set.links.link.delay: this scenario has no links list: its one link's keys are link.KEY (link.delay)"},
		{links + "timeline:\n  - {at: 1s, set: {links.b.name: c}}\n",
			"x.yaml:5: timeline[0].set.links.b.name: a link's name cannot change while the run runs"},
		{links + "timeline:\n  - {at: 1s, set: {links.b: {name: b}}}\n",
			"x.yaml:5: timeline[0].set.links.b: only the links' keys (link.loss, link.uplink.rate, links.NAME.delay, ...) change while the run runs"},
		{links + "timeline:\n  - {at: 1s, set: {links.b.queue.discipline: pie}}\n",
			"x.yaml:5: timeline[0].set.links.b.queue.discipline: the queue's discipline cannot change while the run runs (its limit and bytes can)"},
		{links + "timeline:\n  - {at: 1s, set: {links.b.queue: {discipline: pie}}}\n",
			"x.yaml:5: timeline[0]: link b's uplink's queue settings other than its limits (limit, bytes) cannot change while the run runs (at 1s)"},
	}
	for _, tt := range tests {
		_, err := parse(tt.src)
		if err == nil || !strings.Contains(err.Error()+"\n", tt.want+"\n") {
			t.Errorf("source:\n%s\ngot:  %v\nwant: %s", tt.src, err, tt.want)
		}
	}
}

// TestLinksExpectations: an expectation names a direction of a link of
// the list as summary.json does (eu.uplink), its dot kept.
func TestLinksExpectations(t *testing.T) {
	const links = "links:\n  - {name: a, delay: 1ms}\n  - {name: eu}\n"
	s := mustParse(t, links+"expect:\n  - links.eu.uplink.drops.queue == 0\n")
	if want := []string{"links", "eu.uplink", "drops", "queue"}; !reflect.DeepEqual(s.Expect[0].Path, want) {
		t.Errorf("path %q, want %q", s.Expect[0].Path, want)
	}
	_, err := parse(links + "expect:\n  - links.uplink.drops.queue == 0\n")
	want := `x.yaml:5: expect[0]: "links.uplink.drops.queue == 0": no link named "uplink" (names: a.uplink, a.downlink, eu.uplink, eu.downlink); did you mean "a.uplink"?`
	if err == nil || !strings.Contains(err.Error()+"\n", want+"\n") {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestLinkEndCapturePoints: a links list's link ends are capture points.
func TestLinkEndCapturePoints(t *testing.T) {
	const links = "links:\n  - {name: a, delay: 1ms}\n  - {name: eu}\n"
	s := mustParse(t, links+"capture: [client, eu.server, a.client]\n")
	if want := []string{"client", "eu.server", "a.client"}; !reflect.DeepEqual(s.Capture.Points, want) {
		t.Errorf("points %q, want %q", s.Capture.Points, want)
	}
	_, err := parse(links + "capture: [xyz.server]\n")
	want := `x.yaml:4: capture.points: "xyz.server" is not a capture point (expected one of: client, server, a.client, a.server, eu.client, eu.server)`
	if err == nil || !strings.Contains(err.Error()+"\n", want+"\n") {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if _, err := parse("link: {delay: 1ms}\ncapture: [link.server]\n"); err == nil {
		t.Error("link.server with the link shorthand: no error")
	}
}

// TestLinksShadowedSet: a --set of a link's shared key that a direction's
// own key shadows warns, as with link.
func TestLinksShadowedSet(t *testing.T) {
	p, err := parse("links:\n  - {name: a}\n  - {name: eu, uplink: {loss: 1%}}\n", "links.eu.loss=5%")
	if err != nil {
		t.Fatal(err)
	}
	want := "--set links.eu.loss changes nothing for the uplink: links.eu.uplink.loss (from the file) replaces the shared links.eu.loss as a whole; set links.eu.uplink.loss instead"
	if len(p.Warnings) != 1 || p.Warnings[0] != want {
		t.Errorf("warnings %q, want %q", p.Warnings, want)
	}
	if s := p.Runs[0]; s.Links[1].Downlink.Loss.P != 0.05 || s.Links[1].Uplink.Loss.P != 0.01 {
		t.Errorf("eu: %+v", s.Links[1])
	}
}

// TestCheckCapture: --capture names a point or a link's end that every
// run has; what is neither, or a link a variant lacks, is named.
func TestCheckCapture(t *testing.T) {
	plan, err := Parse("c.yaml", []byte("links: [{name: eu, delay: 1ms}, {name: us}]\nvariants:\n  - {name: one, set: {links: [{name: us}]}}\n  - {name: two}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCapture(plan, []string{"client", "us.server"}); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		point, want string
	}{
		{"middle", `--capture: "middle" is not a capture point (expected one of: client, server, or a link's end: NAME.client, NAME.server)`},
		{"eu.client", `--capture: "eu.client": the scenario has no link "eu" in a links list (variant one)`},
	} {
		if err := CheckCapture(plan, []string{c.point}); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.point, err, c.want)
		}
	}
}
