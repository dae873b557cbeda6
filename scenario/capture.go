package scenario

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// CapturePoints are the points a capture can name; with a links list,
// also each link's ends (LinkEnds).
var CapturePoints = []string{"client", "server"}

// LinkEnds returns the capture points at the ends of the links of a
// links list: NAME.client (what enters the link's uplink and leaves its
// downlink) and NAME.server (what leaves its uplink and enters its
// downlink); none for the link shorthand, whose ends are client and
// server.
func LinkEnds(links []Link) []string {
	if len(links) == 1 && links[0].Name == DefaultLink {
		return nil
	}
	var out []string
	for _, l := range links {
		out = append(out, l.Name+".client", l.Name+".server")
	}
	return out
}

// linkEnd is the form of a link's end as a capture point (eu.server);
// CheckCapture checks that the link is there.
var linkEnd = regexp.MustCompile(`^[A-Za-z0-9._-]+\.(client|server)$`)

// CheckCapture checks the capture points of netjam run --capture against
// every run of plan: each a point of CapturePoints, or the end of a link
// every run's links list has.
func CheckCapture(plan *Plan, points []string) error {
	for _, p := range points {
		if !slices.Contains(CapturePoints, p) && !linkEnd.MatchString(p) {
			return fmt.Errorf("--capture: %q is not a capture point (expected one of: %s, or a link's end: NAME.client, NAME.server)", p, strings.Join(CapturePoints, ", "))
		}
		if link, _, _ := strings.Cut(p, "."); linkEnd.MatchString(p) {
			for _, r := range plan.Runs {
				if !slices.ContainsFunc(r.Links, func(l Link) bool { return l.Name == link && l.Name != DefaultLink }) {
					return fmt.Errorf("--capture: %q: the scenario has no link %q in a links list%s", p, link, variantNote(r.Variant))
				}
			}
		}
	}
	return nil
}

// variantNote names variant v in a message, when there is one.
func variantNote(v string) string {
	if v == "" {
		return ""
	}
	return " (variant " + v + ")"
}

// capture decodes the capture mapping, or a list of points as its short
// form; links are the scenario's, whose ends may be points.
func (d *decoder) capture(n *yaml.Node, links []Link) *Capture {
	c := &Capture{}
	points := n
	if n.Kind == yaml.MappingNode {
		f := d.mapping(n, "capture", captureKeys)
		points = f["points"]
		if v := f["snaplen"]; v != nil {
			if s, ok := d.integer(v, "capture.snaplen", 20, 262144); ok {
				c.Snaplen = int(s)
			}
		}
		if v := f["max_file_size"]; v != nil {
			c.MaxFileBytes, _ = d.size(v, "capture.max_file_size", 1<<16, 1<<40)
		}
		if v := f["max_files"]; v != nil {
			if m, ok := d.integer(v, "capture.max_files", 1, 100000); ok {
				c.MaxFiles = int(m)
			}
		}
		if points == nil {
			d.errorf(n, "capture.points", "a capture needs points (client, server)")
			return c
		}
	}
	if points.Kind != yaml.SequenceNode {
		d.errorf(points, "capture", "expected a list of points (client, server) or a mapping of %s, got %s", andList(captureKeys), describe(points))
		return c
	}
	seen := map[string]bool{}
	all := append(slices.Clone(CapturePoints), LinkEnds(links)...)
	for _, p := range points.Content {
		if v, ok := d.oneOf(p, "capture.points", "capture point", all); ok && !seen[v] {
			seen[v] = true
			c.Points = append(c.Points, v)
		}
	}
	return c
}
