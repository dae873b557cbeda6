package wifi

import (
	"testing"
	"time"
)

// TestAirtime checks TXTIME against hand computations from the standard's
// formulas.
func TestAirtime(t *testing.T) {
	for _, c := range []struct {
		name string
		f    format
		n    int
		rate uint64
		want time.Duration
	}{
		// DSSS: 192 us PLCP + ceil(8n/rate) us.
		{"11b ACK 1M", fmtDSSS, 14, 1e6, 304 * us},
		{"11b ACK 2M", fmtDSSS, 14, 2e6, 248 * us},
		{"11b 1536B 11M", fmtDSSS, 1536, 11e6, (192 + 1118) * us}, // 12288/11 = 1117.09
		{"11b 1536B 5.5M", fmtDSSS, 1536, 5.5e6, (192 + 2235) * us},
		// OFDM: 20 us + 4 us * ceil((16 + 8n + 6) / Ndbps).
		{"11a ACK 24M", fmtOFDM, 14, 24e6, 28 * us},      // 134/96 -> 2 symbols
		{"11a ACK 6M", fmtOFDM, 14, 6e6, 44 * us},        // 134/24 -> 6 symbols
		{"11a RTS 24M", fmtOFDM, 20, 24e6, 28 * us},      // 182/96 -> 2 symbols
		{"11a 1536B 54M", fmtOFDM, 1536, 54e6, 248 * us}, // 12310/216 -> 57 symbols
		{"11a 1536B 6M", fmtOFDM, 1536, 6e6, (20 + 4*513) * us},
		// ERP-OFDM: OFDM + 6 us signal extension.
		{"11g ACK 24M", fmtERP, 14, 24e6, 34 * us},
		{"11g 1536B 54M", fmtERP, 1536, 54e6, 254 * us},
		// HT-mixed: 36 us + 4 us * ceil((16 + 8n + 6) / Ndbps).
		{"11n 1538B MCS7", fmtHT, 1538, 65e6, (36 + 4*48) * us}, // 12326/260 = 47.4
		{"11n 1538B MCS0", fmtHT, 1538, 6.5e6, (36 + 4*475) * us},
	} {
		if got := txTime(c.f, c.n, c.rate); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
