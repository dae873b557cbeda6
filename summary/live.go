package summary

import "errors"

// What a run in progress answers the control API with (emulator.Live): its
// state, its events as they happen, what a change did, and its errors.

// SettingChange is one setting of a direction a change moved from Old to
// New, each as the direction's summary words it ("10Mbps", "5%",
// "20ms ±5ms normal"; "unlimited", "0%", "0s" or "none" for a setting
// that does nothing).
type SettingChange struct {
	Link    string `json:"link"`    // the direction: uplink, downlink, eu.uplink
	Setting string `json:"setting"` // loss, duplicate, corrupt, rate, trace, queue, slot, delay, reorder
	Old     string `json:"old"`
	New     string `json:"new"`
}

// LiveStatus is a run's state now.
type LiveStatus struct {
	Scenario        string        `json:"scenario"`
	Variant         string        `json:"variant,omitempty"`
	ElapsedS        float64       `json:"elapsed_s"`
	DurationS       float64       `json:"duration_s"`
	SampleIntervalS float64       `json:"sample_interval_s"`
	Flows           []LiveFlow    `json:"flows"`
	Links           []LinkSummary `json:"links"`
	// Pending are the changes scheduled ahead, in time order.
	Pending []PendingChange `json:"pending,omitempty"`
}

// LiveFlow is a flow's progress so far.
type LiveFlow struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	BytesReceived uint64  `json:"bytes_received"`
	Packets       uint64  `json:"packets_received,omitempty"`
	CwndSegments  uint32  `json:"cwnd,omitempty"`
	SRTTMs        float64 `json:"srtt_ms,omitempty"`
}

// PendingChange is a change scheduled ahead (emulator.Live.Schedule).
type PendingChange struct {
	AtS float64  `json:"at_s"`
	Set []string `json:"set"`
}

// LiveEvent is what a run in progress tells its watcher
// (emulator.Live.Watch), as it happens: a sample of the time series at
// each sample interval, a change of the path (the timeline's, or one made
// through the live run), a change scheduled ahead, the run's end.
type LiveEvent struct {
	Type    string  `json:"type"` // "sample", "change", "scheduled", "end"
	Variant string  `json:"variant,omitempty"`
	TimeS   float64 `json:"time_s"` // from the run's start: the sample's, the change's
	// Rows are a sample's: timeseries.csv's rows of the interval, each
	// UDP flow's loss_ratio over it, and each direction's settings in
	// force (configured_rate_bps, configured_delay_ms,
	// configured_loss_ratio).
	Rows []SeriesRow `json:"rows,omitempty"`
	// Changes are a change's keys, as events.jsonl has them.
	Changes []TimelineEvent `json:"changes,omitempty"`
	// Set is a scheduled change's, --set's form, to apply at TimeS.
	Set []string `json:"set,omitempty"`
}

// SeriesRow is a row of timeseries.csv: a kind's value for a flow, a
// direction or a Wi-Fi station.
type SeriesRow struct {
	Kind  string  `json:"kind"`
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Applied is what a change made through a live run (emulator.Live) did:
// the time of the run it applied at, and each setting of a direction it
// moved, from the value in force before (the scenario's, a timeline's or
// an earlier change's) to the new one. A change that set what was in force
// already has no Changes.
type Applied struct {
	TimeS   float64         `json:"time_s"`
	Changes []SettingChange `json:"changed"`
	// BackAtS is, for a change made for a while (SetFor), the time of the
	// run the keys go back at; 0 when the run ends first.
	BackAtS float64 `json:"back_at_s,omitempty"`
}

// ErrRunEnded is a live run's error (emulator.Live's) once it has ended.
var ErrRunEnded = errors.New("the run has ended")

// ErrTooManyChanges is a live run's error for a change past those a run
// may make.
var ErrTooManyChanges = errors.New("too many changes")

// Partitioned is a partition made while the run runs: when, and the
// partition before and after it as events.jsonl writes them ("[a] | [b
// c]", "[a] -> [b]", "healed").
type Partitioned struct {
	TimeS float64 `json:"time_s"`
	Old   string  `json:"old"`
	New   string  `json:"new"`
}
