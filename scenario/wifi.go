package scenario

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/wifi"
)

// wifi decodes the wifi mapping. What only package wifi knows (which rates
// a standard has, contention windows of the form 2^k-1, ...) is checked by
// asking wifi to validate the cell.
func (d *decoder) wifi(n *yaml.Node) *wifi.Config {
	f, ok := d.fields(n, "wifi", "a mapping of Wi-Fi keys", wifiKeys)
	if !ok {
		return nil
	}
	w := wifiDefaults()
	before := d.count
	if v := f["standard"]; v != nil {
		w.Standard, _ = d.oneOf(v, "wifi.standard", "Wi-Fi standard", wifi.Standards)
	}
	if v := f["rate"]; v != nil {
		w.Rate, _ = d.bitrate(v, "wifi.rate")
	}
	if v := f["basic_rate"]; v != nil {
		w.BasicRate, _ = d.bitrate(v, "wifi.basic_rate")
	}
	if v := f["slot"]; v != nil {
		w.Slot, _ = d.duration(v, "wifi.slot", true, time.Millisecond)
	}
	if v := f["sifs"]; v != nil {
		w.SIFS, _ = d.duration(v, "wifi.sifs", true, time.Millisecond)
	}
	ints := []struct {
		key    string
		dst    *int
		lo, hi int64
	}{
		{"cw_min", &w.CWMin, 1, 32767}, {"cw_max", &w.CWMax, 1, 32767}, {"retry_limit", &w.RetryLimit, 1, 255},
		{"rts_threshold", &w.RTSThreshold, 1, 65535}, {"queue_limit", &w.QueueLimit, 1, maxPackets},
		{"ampdu_max_bytes", &w.AMPDUMaxBytes, 1, 65535}, {"ampdu_max_frames", &w.AMPDUMaxFrames, 1, 64},
	}
	for _, x := range ints {
		if v := f[x.key]; v != nil {
			if i, ok := d.integer(v, "wifi."+x.key, x.lo, x.hi); ok {
				*x.dst = int(i)
			}
		}
	}
	if v := f["ampdu"]; v != nil {
		w.AMPDU, _ = d.boolean(v, "wifi.ampdu")
	}
	w.Stations = d.stations(n, f["stations"])
	if d.count == before {
		if err := w.Validate(); err != nil {
			// Validate's lines begin with the key they are about:
			// reported at it, as wifi.KEY.
			for _, line := range strings.Split(err.Error(), "\n") {
				at, path := n, "wifi"
				if key, msg, ok := strings.Cut(line, ": "); ok && wifiKeyForm.MatchString(key) {
					path, line = "wifi."+key, msg
					if v := f[strings.SplitN(key, "[", 2)[0]]; v != nil {
						at = v
					}
				}
				d.errorf(at, path, "%s", line)
			}
		}
	}
	return w
}

// wifiKeyForm is the key a line of wifi.Config.Validate's error begins
// with: cw_min, stations[0].
var wifiKeyForm = regexp.MustCompile(`^[a-z_]+(\[[0-9]+\])?$`)

// stations decodes wifi.stations, sn (nil: none, an error of the cell n).
func (d *decoder) stations(n, sn *yaml.Node) []wifi.StationConfig {
	switch {
	case sn == nil:
		d.errorf(n, "wifi.stations", "a Wi-Fi cell needs at least one station")
		return nil
	case sn.Kind != yaml.SequenceNode || len(sn.Content) == 0:
		d.errorf(sn, "wifi.stations", "expected a list of stations, got %s", describe(sn))
		return nil
	}
	var out []wifi.StationConfig
	names := map[string]int{}
	for i, item := range sn.Content {
		path := fmt.Sprintf("wifi.stations[%d]", i)
		sf, ok := d.fields(item, path, "a mapping of station keys", stationKeys)
		if !ok {
			continue
		}
		st := stationDefaults(i)
		if v := sf["name"]; v != nil {
			if name, ok := d.text(v, join(path, "name")); ok {
				if why := itemNameProblem(name); why != "" {
					d.errorf(v, join(path, "name"), "%s is not a valid name (%s)", quote(name), why)
				} else if line, dup := names[name]; dup {
					d.errorf(v, join(path, "name"), "%s names two stations (first at line %d)", quote(name), line)
				} else {
					names[name] = v.Line
					st.Name, path = name, "wifi.stations."+name
				}
			}
		}
		d.stationFields(sf, path, &st)
		out = append(out, st)
	}
	return out
}

// stationFields decodes the keys of a station other than its name.
func (d *decoder) stationFields(sf map[string]*yaml.Node, path string, st *wifi.StationConfig) {
	if v := sf["rate"]; v != nil {
		st.Rate, _ = d.bitrate(v, join(path, "rate"))
	}
	if v := sf["frame_error_rate"]; v != nil {
		st.FrameErrorRate, _ = d.ratio(v, join(path, "frame_error_rate"))
	}
	if v := sf["snr"]; v != nil {
		st.SNR, _ = d.number(v, join(path, "snr"), -20, 100)
	}
	if v := sf["saturate"]; v != nil {
		if b, ok := d.integer(v, join(path, "saturate"), 1, 65535); ok {
			st.Saturate = int(b)
		}
	}
}
