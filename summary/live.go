package summary

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
