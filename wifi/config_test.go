package wifi

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPreset(t *testing.T) {
	c, err := Preset("802.11g")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Standard: "802.11g", Rate: 54e6, Slot: 9 * us, SIFS: 10 * us, CWMin: 15, CWMax: 1023,
		RetryLimit: 7, RTSThreshold: 65535, QueueLimit: 1000, InputLimit: 4096}
	if c.Standard != want.Standard || c.Rate != want.Rate || c.Slot != want.Slot || c.SIFS != want.SIFS ||
		c.CWMin != want.CWMin || c.CWMax != want.CWMax || c.RetryLimit != want.RetryLimit ||
		c.RTSThreshold != want.RTSThreshold || c.QueueLimit != want.QueueLimit || c.InputLimit != want.InputLimit || c.AMPDU {
		t.Errorf("Preset(802.11g) = %+v", c)
	}
	n, _ := Preset("802.11n")
	b, _ := Preset("802.11b")
	if n.Rate != 65e6 || n.AMPDUMaxBytes != 65535 || n.AMPDUMaxFrames != 64 || b.CWMin != 31 || b.Slot != 20*us {
		t.Errorf("presets: 11n %+v, 11b %+v", n, b)
	}
	// A preset with stations added is valid and resolves to itself.
	n.Stations = stations(2)
	if err := n.Validate(); err != nil {
		t.Errorf("preset invalid: %v", err)
	}
	if _, err := Preset("802.11ac"); err == nil || err.Error() != `standard: unknown "802.11ac" (expected one of: 802.11b, 802.11a, 802.11g, 802.11n)` {
		t.Errorf("Preset(802.11ac): %v", err)
	}
}

func TestValidate(t *testing.T) {
	bad := Config{
		Standard:       "802.11g",
		Rate:           11e6,
		BasicRate:      1e6,
		Slot:           9*us + 1,
		SIFS:           -us,
		CWMin:          16,
		CWMax:          7,
		RetryLimit:     300,
		RTSThreshold:   -1,
		QueueLimit:     -1,
		InputLimit:     -1,
		AMPDU:          true,
		AMPDUMaxBytes:  70000,
		AMPDUMaxFrames: 65,
		Stations: []StationConfig{
			{Rate: 65e6, FrameErrorRate: 1.5},
			{FrameErrorRate: 0.1, SNR: 20},
			{SNR: math.NaN(), Saturate: 3000},
			{SNR: 200},
		},
	}
	want := []string{
		"rate: 11 Mbit/s is not a data rate of 802.11g (expected one of: 6, 9, 12, 18, 24, 36, 48, 54 Mbit/s)",
		"basic_rate: 1 Mbit/s is not a control frame rate of 802.11g (expected one of: 6, 9, 12, 18, 24, 36, 48, 54 Mbit/s)",
		"slot: 9.001µs is not a whole number of microseconds up to 1ms",
		"sifs: -1µs is not a whole number of microseconds up to 1ms",
		"cw_min: 16 is not of the form 2^k-1 in 1..32767",
		"cw_max: 7 is below cw_min 16",
		"retry_limit: 300 is not in 1..255",
		"rts_threshold: -1 is not in 1..65535",
		"queue_limit: -1 is not in 1..1048576",
		"input_limit: -1 is negative",
		"ampdu: needs 802.11n, not 802.11g",
		"ampdu_max_bytes: 70000 is not in 1..65535",
		"ampdu_max_frames: 65 is not in 1..64",
		"stations[0].rate: 65 Mbit/s is not a data rate of 802.11g (expected one of: 6, 9, 12, 18, 24, 36, 48, 54 Mbit/s)",
		"stations[0].frame_error_rate: 1.5 is not a probability in [0, 1]",
		"stations[1]: set frame_error_rate or snr, not both",
		"stations[2].snr: NaN",
		"stations[2].saturate: 3000 bytes is not in 0..2296 (an unfragmented MSDU)",
		"stations[3].snr: 200 dB is not in -50..100",
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Stations: stations(1)}, `standard: unknown "" (expected one of: 802.11b, 802.11a, 802.11g, 802.11n)`},
		{Config{Standard: "802.11a"}, "stations: 0 stations, need 1..2007"},
		{Config{Standard: "802.11n", Rate: 54e6, Stations: stations(1)}, "rate: 54 Mbit/s is not a data rate of 802.11n (expected one of: 6.5, 13, 19.5, 26, 39, 52, 58.5, 65 Mbit/s)"},
		{Config{Standard: "802.11b", CWMax: 15, Stations: stations(1)}, "cw_max: 15 is below cw_min 31"},
	} {
		if err := c.cfg.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("Validate(%+v) = %v, want %s", c.cfg, err, c.want)
		}
	}
	if _, err := NewMedium(Config{Standard: "802.11a"}, nil, nil); err == nil || err.Error() != "wifi: stations: 0 stations, need 1..2007" {
		t.Errorf("NewMedium: %v", err)
	}
}

// TestOverrides: non-zero fields replace the preset's.
func TestOverrides(t *testing.T) {
	p, err := (&Config{Standard: "802.11a", Slot: 20 * us, SIFS: 10 * us, CWMin: 31, CWMax: 255, BasicRate: 6e6, Rate: 6e6,
		Stations: []StationConfig{{}, {Rate: 54e6}}}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if p.difs != int64(50*us) || p.eifs != int64((10+50+44)*us) || p.ackTimeout != int64((10+20+25)*us) || p.cwMin != 31 || p.cwMax != 255 {
		t.Errorf("resolved %+v", p)
	}
	if l := p.links[0]; l.rate != 6e6 || l.tAck != int64(44*us) {
		t.Errorf("link 0 %+v", l)
	}
	if l := p.links[1]; l.rate != 54e6 || l.ctrl != 6e6 {
		t.Errorf("link 1 %+v: BasicRate applies to every link", l)
	}
	if p.names[1] != "sta1" {
		t.Errorf("default name %q", p.names[1])
	}
}

// TestSNRModel: the frame error rate is the standard's reference value at
// the sensitivity threshold and falls off steeply around it.
func TestSNRModel(t *testing.T) {
	for _, std := range Standards {
		ph := phys[std]
		for i := range ph.rates {
			th := ph.sens[i] - noiseFloor
			fer := func(snr float64, n int) float64 { return -math.Expm1(float64(8*n) * ph.lnSuccessPerBit(i, snr)) }
			if got := fer(th, ph.sensLen); math.Abs(got-ph.sensPER) > 1e-9 {
				t.Errorf("%s %s: FER at threshold %v, want %v", std, mbps(ph.rates[i]), got, ph.sensPER)
			}
			if hi, lo := fer(th+3, 1536), fer(th-3, 1536); hi > 2e-4 || lo < 0.99 {
				t.Errorf("%s %s: FER of 1536 bytes %v at +3 dB, %v at -3 dB", std, mbps(ph.rates[i]), hi, lo)
			}
		}
	}
	// Thresholds: 54 Mbit/s OFDM at -65 dBm is 26 dB over the -91 dBm floor.
	if th := phys["802.11a"].sens[7] - noiseFloor; th != 26 {
		t.Errorf("54 Mbit/s threshold %v dB", th)
	}
	// In the medium: a clean link loses nothing, a weak one everything.
	m, col := newTestMedium(t, Config{Standard: "802.11a", RetryLimit: 2, Stations: []StationConfig{{SNR: 40}, {SNR: 15}}})
	for i := range 10 {
		m.Arrive(at(time.Duration(i)*time.Millisecond), pkt(1500, uint32(i)), 0, false)
		m.Arrive(at(time.Duration(i)*time.Millisecond+500*us), pkt(1500, uint32(i)), 1, false)
	}
	run(m, time.Second)
	st := m.Stats()
	if len(col.got) != 10 || st.Stations[0].Errors != 0 || st.Stations[1].Errors != 20 || st.Stations[1].Drops["retry"] != 10 {
		t.Errorf("delivered %d; stats %+v", len(col.got), st.Stations)
	}
}
