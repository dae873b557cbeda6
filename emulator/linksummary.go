package emulator

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// A direction's part of the summary (summary.LinkSummary) from its
// configuration and counters, and the words its settings are said in,
// by the summary and by a change.

const nsPerMs = 1e-6

func linkSummary(d impair.Config, st impair.Stats) summary.LinkSummary {
	l := summary.LinkSummary{
		Name:       st.Name,
		Configured: configured(d),
		PacketsIn:  st.InPackets,
		BytesIn:    st.InBytes,
		PacketsOut: st.OutPackets,
		BytesOut:   st.OutBytes,
		WholeGSO:   st.WholeGSO,
		InputWaits: st.InputWaits,
		Drops:      st.Drops,
		TransitMs:  st.Transit.Scale(nsPerMs),
		LatenessMs: st.Lateness.Scale(nsPerMs),
		Stages:     st.Stages,
	}
	l.Achieved.DelayMs = l.TransitMs
	var dropped uint64
	for r, n := range st.Drops {
		if r != impair.DropFlushed.String() {
			dropped += n
		}
	}
	if st.InPackets > 0 {
		l.Achieved.LossRatio = float64(dropped) / float64(st.InPackets)
	}
	for _, s := range st.Stages {
		if s.BusyNs > 0 {
			l.Achieved.RateBps = float64(s.OutBytes) * 8 / (float64(s.BusyNs) / 1e9)
		}
		l.Duplicated += s.Duplicated
		l.Corrupted += s.Corrupted
		l.Reordered += s.Reordered
		l.ECNMarked += s.Marked
		if s.Name == "queue" && s.Sojourn != nil {
			l.QueueDelayMs = s.Sojourn.Scale(nsPerMs)
		}
	}
	return l
}

func configured(d impair.Config) summary.Configured {
	c := summary.Configured{
		Summary:   describe(d),
		DelayMs:   float64(d.Delay.Time) / float64(time.Millisecond),
		JitterMs:  float64(d.Delay.Jitter) / float64(time.Millisecond),
		RateBps:   d.Rate.Bitrate,
		Duplicate: d.Duplicate.P,
		Corrupt:   d.Corrupt.P,
		Reorder:   d.Reorder.P,
	}
	if d.Loss.Model != impair.LossNone {
		c.LossModel = d.Loss.Model.String()
	}
	if d.Delay.Jitter > 0 {
		c.Distribution = d.Delay.Distribution.String()
	}
	if d.Validate() == nil {
		c.LossRatio = d.Loss.MeanLoss()
	}
	if d.Rate.Trace != nil {
		c.RateBps = uint64(math.Round(d.Rate.Trace.MeanBitrate()))
		c.Trace = d.Rate.Trace.File
	}
	if d.Rate.Limited() {
		c.QueueDiscpline = d.Queue.Discipline.String()
		c.QueuePackets = d.Queue.LimitPackets
		c.QueueBytes = d.Queue.LimitBytes
	}
	return c
}

// describe says in one line what a direction does to packets, in the
// order the chain applies it.
func describe(d impair.Config) string {
	parts := settings(d)
	if len(parts) == 0 {
		return "transparent"
	}
	words := make([]string, len(parts))
	for i, p := range parts {
		words[i] = p.name + " " + p.value
	}
	return strings.Join(words, ", ")
}

// setting is one part of a direction's description: a name (loss, rate,
// delay) and its value as the description words it.
type setting struct{ name, value string }

// settings are the parts of describe's line, in its order; a part is
// left out where the direction does nothing of it (settingUnset).
func settings(d impair.Config) []setting {
	var parts []setting
	switch d.Loss.Model {
	case impair.LossRandom:
		if d.Loss.P == 0 {
			break
		}
		s := pct(d.Loss.P)
		if d.Loss.Correlation > 0 {
			s += " corr " + pct(d.Loss.Correlation)
		}
		parts = append(parts, setting{"loss", s})
	case impair.LossGE:
		parts = append(parts, setting{"loss", fmt.Sprintf("gemodel p %s r %s 1-h %s 1-k %s",
			pct(d.Loss.P), pct(d.Loss.R), pct(d.Loss.OneMinusH), pct(d.Loss.OneMinusK))})
	case impair.LossState:
		parts = append(parts, setting{"loss", fmt.Sprintf("state p13 %s p31 %s p32 %s p23 %s p14 %s",
			pct(d.Loss.P13), pct(d.Loss.P31), pct(d.Loss.P32), pct(d.Loss.P23), pct(d.Loss.P14))})
	}
	if d.Duplicate.P > 0 {
		parts = append(parts, setting{"duplicate", pct(d.Duplicate.P)})
	}
	if d.Corrupt.P > 0 {
		parts = append(parts, setting{"corrupt", pct(d.Corrupt.P)})
	}
	if d.Rate.Limited() {
		q := d.Queue.Discipline.String()
		if d.Queue.LimitPackets > 0 {
			q += fmt.Sprintf(" %dp", d.Queue.LimitPackets)
		}
		if d.Queue.LimitBytes > 0 {
			q += fmt.Sprintf(" %dB", d.Queue.LimitBytes)
		}
		if d.Queue.ECN {
			q += " ecn"
		}
		rate := setting{"rate", scenario.FormatRate(d.Rate.Bitrate)}
		if t := d.Rate.Trace; t != nil {
			rate = setting{"trace", fmt.Sprintf("%s (mean %.3gMbps)", filepath.Base(t.File), t.MeanBitrate()/1e6)}
		}
		parts = append(parts, rate, setting{"queue", q})
	}
	if d.Slot.Min > 0 || d.Slot.Max > 0 {
		parts = append(parts, setting{"slot", fmt.Sprintf("%v-%v", d.Slot.Min, d.Slot.Max)})
	}
	if d.Delay.Time > 0 || d.Delay.Jitter > 0 {
		s := d.Delay.Time.String()
		if d.Delay.Jitter > 0 {
			s += " ±" + d.Delay.Jitter.String() + " " + d.Delay.Distribution.String()
		}
		parts = append(parts, setting{"delay", s})
	}
	if d.Reorder.P > 0 {
		parts = append(parts, setting{"reorder", fmt.Sprintf("%s gap %d", pct(d.Reorder.P), d.Reorder.Gap)})
	}
	return parts
}

// settingNames are the names of settings' parts, in its order.
var settingNames = []string{"loss", "duplicate", "corrupt", "rate", "trace", "queue", "slot", "delay", "reorder"}

// settingUnset is how a change words a setting settings leaves out: what
// the direction then does of it.
func settingUnset(name string) string {
	switch name {
	case "loss", "duplicate", "corrupt", "reorder":
		return "0%"
	case "delay":
		return "0s"
	case "rate":
		return "unlimited"
	}
	return "none"
}

// settingChanges are the settings of direction link that differ between
// before and after, in describe's order.
func settingChanges(link string, before, after impair.Config) []summary.SettingChange {
	old, now := settings(before), settings(after)
	value := func(parts []setting, name string) string {
		for _, p := range parts {
			if p.name == name {
				return p.value
			}
		}
		return settingUnset(name)
	}
	var out []summary.SettingChange
	for _, n := range settingNames {
		if o, v := value(old, n), value(now, n); o != v {
			out = append(out, summary.SettingChange{Link: link, Setting: n, Old: o, New: v})
		}
	}
	return out
}

func pct(v float64) string { return fmt.Sprintf("%g%%", v*100) }
