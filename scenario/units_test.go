package scenario

import (
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		err  string
	}{
		{in: "10Mbps", want: 10_000_000},
		{in: "1.5Gbps", want: 1_500_000_000},
		{in: "500kbps", want: 500_000},
		{in: "500Kbps", want: 500_000},
		{in: "64kbit", want: 64_000},
		{in: "64Kbit", want: 64_000},
		{in: "20mbit", want: 20_000_000},
		{in: "20Mbit", want: 20_000_000},
		{in: "20Mbit/s", want: 20_000_000},
		{in: "1gbit", want: 1_000_000_000},
		{in: "2.5Gbit/s", want: 2_500_000_000},
		{in: "1Tbps", want: 1_000_000_000_000},
		{in: "9600bps", want: 9600},
		{in: "9600bit", want: 9600},
		{in: "9600bit/s", want: 9600},
		{in: "10 Mbps", want: 10_000_000},
		{in: ".5Mbps", want: 500_000},
		{in: "1.000001Mbps", want: 1_000_001},
		{in: "unlimited", want: 0},
		{in: "0Mbps", want: 0}, // the parser allows 0; the decoder refuses it
		{in: "10Mbs", err: `"10Mbs" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{in: "10", err: `"10" is not a rate (missing unit; examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{in: "Mbps", err: `"Mbps" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{in: "-10Mbps", err: `"-10Mbps" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{in: "1e6bps", err: `"1e6bps" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{in: "10  Mbps", err: `"10  Mbps" is not a rate (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{in: "10mbps", err: `"10mbps" is ambiguous (tc reads mbps as bytes per second): write 10Mbps for bits per second`},
		{in: "1.5gbps", err: `"1.5gbps" is ambiguous (tc reads gbps as bytes per second): write 1.5Gbps for bits per second`},
		{in: "10MBps", err: `"10MBps" is in bytes per second, but rates are in bits per second: write 80Mbps`},
		{in: "1.5MB/s", err: `"1.5MB/s" is in bytes per second, but rates are in bits per second: write 12Mbps`},
		{in: "125kBps", err: `"125kBps" is in bytes per second, but rates are in bits per second: write 1Mbps`},
		{in: "1000GBps", err: `"1000GBps" is in bytes per second, but rates are in bits per second (examples: 10Mbps, 1.5Gbps, 500kbps)`},
		{in: "1.5bps", err: `"1.5bps" is not a whole number of bits per second`},
		{in: "1.0000001Mbps", err: `"1.0000001Mbps" is not a whole number of bits per second`},
		{in: "1001Gbps", err: `"1001Gbps" is more than the maximum rate, 1Tbps`},
		{in: "99999999999999999999999999999Gbps", err: `"99999999999999999999999999999Gbps" is more than the maximum rate, 1Tbps`},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseRate(%q) = %d, %v; want error %s", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatRate(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{0, "unlimited"},
		{1, "1bps"},
		{999, "999bps"},
		{1000, "1kbps"},
		{1234, "1.234kbps"},
		{10_000_000, "10Mbps"},
		{1_500_000_000, "1.5Gbps"},
		{1_000_000_001, "1.000000001Gbps"},
		{1_000_000_000_000, "1Tbps"},
	}
	for _, tt := range tests {
		got := FormatRate(tt.in)
		if got != tt.want {
			t.Errorf("FormatRate(%d) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := ParseRate(got); err != nil || back != tt.in {
			t.Errorf("ParseRate(FormatRate(%d)) = %d, %v", tt.in, back, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "1500", want: 1500},
		{in: "1500B", want: 1500},
		{in: "64kB", want: 64_000},
		{in: "64KB", want: 64_000},
		{in: "1.5MB", want: 1_500_000},
		{in: "2GB", want: 2_000_000_000},
		{in: "64KiB", want: 65536},
		{in: "1.5KiB", want: 1536},
		{in: "1MiB", want: 1 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "1.5 MB", want: 1_500_000},
		{in: "1.5", err: `"1.5" is not a whole number of bytes`},
		{in: "1.0001KB", err: `"1.0001KB" is not a whole number of bytes`},
		{in: "10K", err: `"10K" is ambiguous: write 10KB (powers of 1000) or 10KiB (powers of 1024)`},
		{in: "10m", err: `"10m" is ambiguous: write 10MB (powers of 1000) or 10MiB (powers of 1024)`},
		{in: "10Mb", err: `"10Mb" is ambiguous (bits or bytes?): sizes are in bytes, write 10MB or 10MiB`},
		{in: "10kbit", err: `"10kbit" is ambiguous (bits or bytes?): sizes are in bytes, write 10KB or 10KiB`},
		{in: "10b", err: `"10b" is ambiguous (bits or bytes?): sizes are in bytes, write 10B`},
		{in: "10XB", err: `"10XB" is not a size (examples: 1500B, 64KiB, 1.5MB)`},
		{in: "-1MB", err: `"-1MB" is not a size (examples: 1500B, 64KiB, 1.5MB)`},
		{in: "", err: `"" is not a size (examples: 1500B, 64KiB, 1.5MB)`},
		{in: "10000000000GiB", err: `"10000000000GiB" is too large`},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseSize(%q) = %d, %v; want error %s", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseRatio(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  string
	}{
		{in: "5%", want: 0.05},
		{in: "0.05", want: 0.05},
		{in: "5 %", want: 0.05},
		{in: "0", want: 0},
		{in: "1", want: 1},
		{in: "100%", want: 1},
		{in: "33.3%", want: 0.333},
		{in: ".5", want: 0.5},
		{in: "1e-05", want: 0.00001},
		{in: "150%", want: 1.5}, // the parser allows it; the decoder checks the range
		{in: "-5%", err: `"-5%" is not a ratio (examples: 5%, 0.05)`},
		{in: "five", err: `"five" is not a ratio (examples: 5%, 0.05)`},
		{in: "NaN", err: `"NaN" is not a ratio (examples: 5%, 0.05)`},
		{in: ".inf", err: `".inf" is not a ratio (examples: 5%, 0.05)`},
		{in: "5%%", err: `"5%%" is not a ratio (examples: 5%, 0.05)`},
		{in: "0x1p-2", err: `"0x1p-2" is not a ratio (examples: 5%, 0.05)`},
	}
	for _, tt := range tests {
		got, err := ParseRatio(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseRatio(%q) = %v, %v; want error %s", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRatio(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "0", want: 0},
		{in: "250us", want: 250 * time.Microsecond},
		{in: "250µs", want: 250 * time.Microsecond},
		{in: "10ms", want: 10 * time.Millisecond},
		{in: "1.5s", want: 1500 * time.Millisecond},
		{in: "1m30s", want: 90 * time.Second},
		{in: "50 ms", want: 50 * time.Millisecond},
		{in: "-5ms", want: -5 * time.Millisecond}, // the decoder checks the range
		{in: "50", err: `"50" is not a duration (missing unit; examples: 50ms, 250us, 1.5s)`},
		{in: "1.5", err: `"1.5" is not a duration (missing unit; examples: 50ms, 250us, 1.5s)`},
		{in: "1d", err: `"1d" is not a duration (examples: 50ms, 250us, 1.5s)`},
		{in: "fast", err: `"fast" is not a duration (examples: 50ms, 250us, 1.5s)`},
		{in: "1h 30m", err: `"1h 30m" is not a duration (examples: 50ms, 250us, 1.5s)`},
	}
	for _, tt := range tests {
		got, err := parseDuration(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("parseDuration(%q) = %v, %v; want error %s", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestQuoteShortens(t *testing.T) {
	got := quote("0123456789012345678901234567890123456789abc")
	if want := `"0123456789012345678901234567890123456789..."`; got != want {
		t.Errorf("quote = %s, want %s", got, want)
	}
}
