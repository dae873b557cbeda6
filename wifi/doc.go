// Package wifi models a Wi-Fi cell: an access point and its stations
// sharing one channel under the 802.11 distributed coordination function
// (DCF), so that netjam's packets see what a shared medium does to them:
// contention delay, collisions, retries, losses after the retry limit, and
// a throughput that shrinks as stations are added.
//
// Like package impair, wifi moves pooled *impair.Packet values and
// timestamps and knows nothing of gVisor or TUN. A Medium is a
// discrete-event simulation with nanosecond resolution: a frame enters at
// its arrival time and leaves at its computed delivery time, with no
// sleeping per slot, no busy loop, and no goroutine or timer per frame.
// Runner drives a Medium in real time from one goroutine on a clock.Clock,
// as impair.Runner drives a Chain.
//
// # What is modelled
//
//   - DCF as IEEE 802.11-2016 clause 10.3 defines it: DIFS, EIFS, slotted
//     binary exponential backoff frozen while the medium is busy, immediate
//     access and post-backoff, ACK after SIFS, ACK timeout, the retry limit,
//     RTS/CTS above a threshold, NAV.
//   - PHY presets for 802.11b (HR/DSSS, long preamble), 802.11a (OFDM),
//     802.11g (ERP-OFDM, short slot) and 802.11n (HT-mixed, one stream, 20
//     MHz, optional A-MPDU with BlockAck): slot, SIFS, CW bounds, preamble
//     and header durations, symbol rounding, data and basic rates.
//   - Per-station data rate and frame error rate, fixed or derived from an
//     SNR; per-station and per-AP-queue packet limits; saturated background
//     stations.
//
// # What is not
//
// Hidden nodes, capture, propagation delay, rate adaptation, power save,
// fragmentation, beacons and management frames, EDCA (QoS access
// categories), 802.11b short preambles and protection of 11b stations in
// an 11g cell. Receivers deliver a frame at the end of the exchange (after
// the ACK) and do not reorder an A-MPDU's MPDUs when some must be resent.
//
// # Frame errors
//
// A station's link loses each data frame (each MPDU of an A-MPDU) with a
// fixed probability, StationConfig.FrameErrorRate, or with one derived from
// StationConfig.SNR by a deliberately simple model anchored on the
// standard. The standard defines a receiver's minimum sensitivity per rate
// as the input level at which it loses 10% of 1000-byte frames (OFDM; HT:
// 4096 bytes; DSSS: 8% of 1024 bytes). With the noise at the receiver taken
// as thermal noise over 20 MHz (-101 dBm) plus the standard's 10 dB noise
// figure, -91 dBm, a rate's threshold SNR is its sensitivity + 91 dB: 9 dB
// at 6 Mbit/s, 26 dB at 54 Mbit/s, 27 dB at MCS 7. Around the threshold the
// bit error rate falls tenfold per dB, the steepness of the waterfall of
// BCC-coded OFDM, and an n-byte MPDU is lost with probability
// 1 - (1 - BER)^(8n). The result goes from almost every frame lost to almost
// none within about 4 dB, where the standard puts the rate's limit. Control
// frames are never lost.
//
// # Validation
//
// Tests check exact timings of single exchanges, collisions, freezing,
// retries and RTS/CTS against the standard's arithmetic, and the saturation
// throughput of 1 to 50 stations against Bianchi's analytic model
// (BianchiModel); BIANCHI.md has the comparison.
//
// # Randomness
//
// Each contender (station or AP) draws backoffs and frame errors from its
// own PCG stream derived from Config.Seed, so the same seed and the same
// arrivals give the same result on every run.
package wifi
