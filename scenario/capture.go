package scenario

import (
	"go.yaml.in/yaml/v3"
)

// CapturePoints are the points a capture can name.
var CapturePoints = []string{"client", "server"}

// capture decodes the capture mapping, or a list of points as its short
// form.
func (d *decoder) capture(n *yaml.Node) *Capture {
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
	for _, p := range points.Content {
		if v, ok := d.oneOf(p, "capture.points", "capture point", CapturePoints); ok && !seen[v] {
			seen[v] = true
			c.Points = append(c.Points, v)
		}
	}
	return c
}
