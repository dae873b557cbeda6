package scenario

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Unit parsing. The parsers are exact: "1.5Gbps" is 1500000000 bits/s and
// "1.5KiB" is 1536 bytes, with no float rounding on the way, because a rate
// or size written in a scenario must mean the same thing on every machine.
// Spellings that tc or common usage read two ways (tc reads "mbps" as
// megaBYTES per second, "10K" may be 10000 or 10240) are rejected with a
// message that names both readings rather than silently picking one.

// Examples quoted in error messages, so that every message shows a form that
// would have worked.
const (
	rateExamples     = "examples: 10Mbps, 1.5Gbps, 500kbps"
	sizeExamples     = "examples: 1500B, 64KiB, 1.5MB"
	ratioExamples    = "examples: 5%, 0.05"
	durationExamples = "examples: 50ms, 250us, 1.5s"
)

// MaxRate is the largest rate a scenario may ask for, 1Tbps. It keeps every
// bits-times-nanoseconds product the emulator computes far from overflow.
const MaxRate = 1_000_000_000_000

// rateUnits maps every accepted rate unit to bits per second. Lower-case
// "kbit", "mbit", "gbit" are tc's spellings and unambiguous; "kbps" is the
// common spelling of kilobits. "mbps" and "gbps" are not here: see ParseRate.
var rateUnits = map[string]uint64{
	"bps": 1, "bit": 1, "bit/s": 1,
	"kbps": 1e3, "Kbps": 1e3, "kbit": 1e3, "Kbit": 1e3, "kbit/s": 1e3, "Kbit/s": 1e3,
	"Mbps": 1e6, "mbit": 1e6, "Mbit": 1e6, "mbit/s": 1e6, "Mbit/s": 1e6,
	"Gbps": 1e9, "gbit": 1e9, "Gbit": 1e9, "gbit/s": 1e9, "Gbit/s": 1e9,
	"Tbps": 1e12, "tbit": 1e12, "Tbit": 1e12, "tbit/s": 1e12, "Tbit/s": 1e12,
}

// byteRateUnits are rates in bytes per second, in bytes. They are rejected
// (netjam rates are in bits) but recognised, so the message can give the
// equivalent in bits.
var byteRateUnits = map[string]uint64{
	"Bps": 1, "B/s": 1,
	"kBps": 1e3, "KBps": 1e3, "kB/s": 1e3, "KB/s": 1e3,
	"MBps": 1e6, "MB/s": 1e6,
	"GBps": 1e9, "GB/s": 1e9,
}

// sizeUnits maps every accepted size unit to bytes: SI prefixes are powers of
// 1000, IEC prefixes (KiB...) powers of 1024.
var sizeUnits = map[string]uint64{
	"B":  1,
	"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
}

// number matches the numeric part of a value with a unit: a plain decimal,
// no sign, no exponent, no hex. Anything fancier is not something a person
// writes for a rate or a size, so it is better reported than guessed at.
var number = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?|\.[0-9]+) ?(.*)$`)

// maxDigits bounds the numeric part before it reaches math/big, so that a
// pathological input cannot make parsing slow.
const maxDigits = 40

// splitNumber splits "1.5 Gbps" into "1.5" and "Gbps". ok is false when s
// does not start with a plain decimal number.
func splitNumber(s string) (num, unit string, ok bool) {
	m := number.FindStringSubmatch(s)
	if m == nil || len(m[1]) > maxDigits {
		return "", "", false
	}
	return m[1], m[2], true
}

// scale returns num*mult as an integer. exact is false when the product has
// a fractional part; overflow is true when it exceeds limit.
func scale(num string, mult, limit uint64) (v uint64, exact, overflow bool) {
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		// splitNumber only lets plain decimals through, which big.Rat parses.
		return 0, false, false
	}
	r.Mul(r, new(big.Rat).SetUint64(mult))
	if !r.IsInt() {
		return 0, false, false
	}
	n := r.Num()
	if !n.IsUint64() || n.Uint64() > limit {
		return 0, true, true
	}
	return n.Uint64(), true, false
}

// ParseRate parses a rate in bits per second: a decimal number and one of
// the units bps (also bit, bit/s), kbps (Kbps, kbit, Kbit), Mbps (mbit,
// Mbit), Gbps (gbit, Gbit) or Tbps (tbit, Tbit), each also with a "/s"
// after "bit"; prefixes are powers of 1000 and a space may separate number
// and unit. "unlimited" parses as 0. Rates in bytes per second (MBps, MB/s)
// and "mbps"/"gbps", which tc reads as megabytes per second, are rejected
// with a message saying what to write instead. The result is at most 1Tbps.
func ParseRate(s string) (uint64, error) {
	if s == "unlimited" {
		return 0, nil
	}
	num, unit, ok := splitNumber(s)
	if !ok {
		return 0, fmt.Errorf("%s is not a rate (%s)", quote(s), rateExamples)
	}
	if unit == "" {
		return 0, fmt.Errorf("%s is not a rate (missing unit; %s)", quote(s), rateExamples)
	}
	mult, ok := rateUnits[unit]
	if !ok {
		if m, ok := byteRateUnits[unit]; ok {
			if bits, exact, over := scale(num, 8*m, MaxRate); exact && !over {
				return 0, fmt.Errorf("%s is in bytes per second, but rates are in bits per second: write %s", quote(s), FormatRate(bits))
			}
			return 0, fmt.Errorf("%s is in bytes per second, but rates are in bits per second (%s)", quote(s), rateExamples)
		}
		switch unit {
		case "mbps", "gbps", "tbps":
			return 0, fmt.Errorf("%s is ambiguous (tc reads %s as bytes per second): write %s%s for bits per second",
				quote(s), unit, num, strings.ToUpper(unit[:1])+unit[1:])
		}
		return 0, fmt.Errorf("%s is not a rate (%s)", quote(s), rateExamples)
	}
	v, exact, over := scale(num, mult, MaxRate)
	switch {
	case over:
		return 0, errors.New(rateTooHigh(quote(s)))
	case !exact:
		return 0, fmt.Errorf("%s is not a whole number of bits per second", quote(s))
	}
	return v, nil
}

// rateTooHigh is the message of a rate, written text, over MaxRate.
func rateTooHigh(text string) string {
	return text + " is more than the maximum rate, " + FormatRate(MaxRate)
}

// FormatRate formats a rate in bits per second with the largest unit that
// keeps it readable, exactly: 1500000000 is "1.5Gbps", 1234 is "1.234kbps".
// 0 is "unlimited". ParseRate(FormatRate(r)) == r for every r up to 1Tbps.
func FormatRate(bps uint64) string {
	if bps == 0 {
		return "unlimited"
	}
	for _, u := range []struct {
		mult uint64
		name string
	}{{1e12, "Tbps"}, {1e9, "Gbps"}, {1e6, "Mbps"}, {1e3, "kbps"}} {
		if bps >= u.mult {
			return formatScaled(bps, u.mult) + u.name
		}
	}
	return strconv.FormatUint(bps, 10) + "bps"
}

// formatScaled writes v/mult as an exact decimal, mult being a power of ten.
func formatScaled(v, mult uint64) string {
	s := strconv.FormatUint(v/mult, 10)
	if frac := v % mult; frac != 0 {
		digits := len(strconv.FormatUint(mult, 10)) - 1
		f := fmt.Sprintf("%0*d", digits, frac)
		s += "." + strings.TrimRight(f, "0")
	}
	return s
}

// ParseSize parses a size in bytes: a plain integer (bytes), or a decimal
// number with one of the units B, kB (also KB), MB, GB (powers of 1000) or
// KiB, MiB, GiB (powers of 1024); a space may separate number and unit. The
// result must be a whole number of bytes. Bare prefixes (K, M) and bit-sized
// units (Kb, mb) are rejected as ambiguous.
func ParseSize(s string) (int64, error) {
	num, unit, ok := splitNumber(s)
	if !ok {
		return 0, fmt.Errorf("%s is not a size (%s)", quote(s), sizeExamples)
	}
	mult := uint64(1)
	if unit != "" {
		mult, ok = sizeUnits[unit]
	}
	if !ok {
		switch unit {
		case "k", "K", "m", "M", "g", "G":
			u := strings.ToUpper(unit)
			return 0, fmt.Errorf("%s is ambiguous: write %s%sB (powers of 1000) or %s%siB (powers of 1024)", quote(s), num, u, num, u)
		case "b", "kb", "Kb", "mb", "Mb", "gb", "Gb", "bit", "kbit", "Kbit", "mbit", "Mbit", "gbit", "Gbit":
			u := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(unit, "it"), "b"))
			if u == "" {
				return 0, fmt.Errorf("%s is ambiguous (bits or bytes?): sizes are in bytes, write %sB", quote(s), num)
			}
			return 0, fmt.Errorf("%s is ambiguous (bits or bytes?): sizes are in bytes, write %s%sB or %s%siB", quote(s), num, u, num, u)
		}
		return 0, fmt.Errorf("%s is not a size (%s)", quote(s), sizeExamples)
	}
	v, exact, over := scale(num, mult, math.MaxInt64)
	switch {
	case over:
		return 0, fmt.Errorf("%s is too large", quote(s))
	case !exact:
		return 0, fmt.Errorf("%s is not a whole number of bytes", quote(s))
	}
	return int64(v), nil
}

// ratioNumber is the numeric part of a ratio: a decimal with an optional
// exponent (YAML writes small floats as 1e-05), no sign.
var ratioNumber = regexp.MustCompile(`^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?$`)

// ParseRatio parses a ratio written as a percentage ("5%", "0.5 %") or a
// fraction ("0.05"), returning the fraction. It does not check the range;
// negative numbers are not ratios. The result is the float64 nearest to the
// exact decimal, so "5%" and "0.05" give the same value.
func ParseRatio(s string) (float64, error) {
	num, pct := strings.CutSuffix(s, "%")
	if pct {
		num = strings.TrimSuffix(num, " ")
	}
	if !ratioNumber.MatchString(num) || len(num) > maxDigits {
		return 0, fmt.Errorf("%s is not a ratio (%s)", quote(s), ratioExamples)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%s is not a ratio (%s)", quote(s), ratioExamples)
	}
	if pct {
		r.Quo(r, big.NewRat(100, 1))
	}
	f, _ := r.Float64()
	return f, nil
}

// spacedDuration matches a single-unit duration with a space before the
// unit, "50 ms", which people write and time.ParseDuration refuses.
var spacedDuration = regexp.MustCompile(`^([-+]?[0-9.]+) ([a-zµμ]+)$`)

// bareNumber matches a number without a unit, to add a hint to the message.
var bareNumber = regexp.MustCompile(`^[-+]?[0-9.]+$`)

// parseDuration parses a Go duration ("250us", "1m30s", and plain "0"),
// also accepting one space before a single unit ("50 ms").
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if m := spacedDuration.FindStringSubmatch(s); m != nil {
		if d, err := time.ParseDuration(m[1] + m[2]); err == nil {
			return d, nil
		}
	}
	if bareNumber.MatchString(s) {
		return 0, fmt.Errorf("%s is not a duration (missing unit; %s)", quote(s), durationExamples)
	}
	return 0, fmt.Errorf("%s is not a duration (%s)", quote(s), durationExamples)
}

// formatDuration is time.Duration.String without the zero tails: "1h"
// rather than "1h0m0s", for bounds in error messages.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// formatPercent writes a ratio as a percentage for messages, rounded to
// six significant digits so float noise (7.000000000000001%) stays out.
func formatPercent(f float64) string {
	return strconv.FormatFloat(f*100, 'g', 6, 64) + "%"
}

// quote quotes a value from the file for a message, shortened so that one
// runaway value cannot flood the error output.
func quote(s string) string {
	const max = 40
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "..."
	}
	return strconv.Quote(s)
}

// ParseDuration parses a duration as the scenario file writes one ("30s",
// "1m30s", "50 ms"), with the file's messages ("missing unit" for a bare
// number), for command-line flags that set a duration.
func ParseDuration(s string) (time.Duration, error) {
	return parseDuration(s)
}

// ParseSeed parses a seed as the scenario file writes one: an unsigned
// 64-bit integer, decimal or with a 0x, 0o or 0b prefix, "_" allowed
// between digits.
func ParseSeed(s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 0, 64)
	if err != nil {
		if bareNumber.MatchString(s) && !strings.Contains(s, ".") && !strings.HasPrefix(s, "-") {
			return 0, fmt.Errorf("%s is out of range (expected 0 to %d)", s, uint64(math.MaxUint64))
		}
		return 0, fmt.Errorf("%s is not a seed (expected an integer from 0 to %d)", quote(s), uint64(math.MaxUint64))
	}
	return v, nil
}
