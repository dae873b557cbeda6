package impair

import (
	"math"
	"math/rand/v2"
	"time"
)

// jitter draws the random part of each packet's delay: a signed offset the
// delay line adds to DelayConfig.Time. Like the stages, it is used from
// the chain's goroutine only; it allocates nothing.
//
// # Shapes
//
// The shapes are netem's, each drawn from its exact inverse CDF (quantile
// function) Q at a uniform u, then scaled by Jitter:
//
//   - Uniform: uniform in [-Jitter, +Jitter], netem's default. Jitter is the
//     half-width, so the standard deviation is Jitter/√3.
//   - Normal: mean 0, standard deviation Jitter.
//   - Pareto: X = (1-u)^(-1/3), the Pareto law with alpha 3 and minimum 1
//     (mean 3/2, variance 3/4), standardized to (X - 3/2)/√(3/4): mean 0,
//     standard deviation 1. Its left end is -0.577·Jitter; its right tail is
//     heavy (P(offset > k·Jitter) falls as k^-3).
//   - ParetoNormal: netem's paretonormal, whose table generator (iproute2
//     netem/paretonormal.c, from NIST Net) adds quantiles rather than
//     densities: each table entry is (normal + 3·pareto)/4 taken at the
//     same u, where pareto is its Pareto table, (X - 3/2)·4/3. That is the
//     quantile function Q(u) = Φ⁻¹(u)/4 + X(u) - 3/2, a comonotone sum, not a
//     mixture. Its mean is 0; here it is divided by its standard
//     deviation (paretoNormalSD), so Jitter is again the standard
//     deviation.
//
// netem reads these shapes from 4096-entry tables of int16 scaled by 8192,
// which cuts every tail at 4 table units (its pareto table therefore puts
// 1.1% of the packets exactly at the cut and has a standard deviation of
// about 0.82, not 1). The closed forms here have no such cut; the only
// bound is maxJitterSigma, far out in the Pareto tail.
//
// # Correlation
//
// netem correlates jitter by averaging each uniform draw with the previous
// one, which narrows the distribution (the sd shrinks as the correlation
// grows) and bends its shape. Here correlation is a Gaussian copula: a
// latent standard normal follows an AR(1) process
//
//	z_n = ρ·z_{n-1} + √(1-ρ²)·e_n,  e_n ~ N(0, 1) independent,
//
// whose every z_n is exactly N(0, 1), and each draw is Q(Φ(z_n)). The
// marginal distribution is therefore exact whatever ρ. Consecutive draws
// have lag-1 correlation ρ for Normal (the draw is z itself) and less for
// the other shapes, whose transform bends the dependence: at ρ = 0.5,
// Uniform (6/π)·asin(ρ/2) = 0.483, ParetoNormal 0.38, Pareto 0.33 (their
// rank correlation is (6/π)·asin(ρ/2) for all four). The chain starts from
// a stationary z_0, so the first packet is no different from the others.
//
// # Reproducibility
//
// The draws depend only on the stream rng; on one platform the same seed
// gives the same offsets to the nanosecond. The transforms use math.Erf,
// Erfc and Cbrt, whose last-bit rounding Go does not promise to be the same
// on every architecture, so across architectures an offset may rarely
// differ by a nanosecond.
type jitter struct {
	rng   *rand.Rand
	shape Distribution
	// scale is Jitter in nanoseconds; 0 disables the generator.
	scale float64
	// rho and innov are the AR(1) coefficients ρ and √(1-ρ²).
	rho, innov float64
	// z is the latent normal of the previous draw (when rho > 0).
	z float64
}

// Constants of the standardized shapes.
const (
	// paretoMean and paretoSD are the mean and standard deviation of the
	// Pareto law with alpha 3 and minimum 1: alpha/(alpha-1) and
	// √(alpha/((alpha-1)²(alpha-2))).
	paretoMean = 1.5
	paretoSD   = 0.8660254037844386 // √3/2

	// paretoNormalSD is the standard deviation of netem's paretonormal
	// quantile function Q(u) = Φ⁻¹(u)/4 + X(u) - 3/2 (its mean is 0):
	// √(1/16 + 3/4 + E[Z·X]/2) with E[Z·X] = 0.5874707484778, a
	// one-dimensional integral. TestParetoNormalSD checks it by quadrature.
	paretoNormalSD = 1.0517772455415209

	// maxJitterSigma bounds a standardized draw to ±1000 standard
	// deviations. Only the Pareto tails of Pareto and ParetoNormal reach
	// it (about 1.5e-9 of the draws), where it turns an absurd delay (in
	// theory unbounded) into a long one and keeps every offset far from
	// time.Duration's range. It lowers their variance by 0.3% and 0.2%.
	maxJitterSigma = 1000
)

// newJitter returns the jitter generator of cfg drawing from rng. With
// cfg.Jitter == 0 it never draws and next returns 0.
func newJitter(cfg DelayConfig, rng *rand.Rand) *jitter {
	j := &jitter{rng: rng, shape: cfg.Distribution}
	if cfg.Jitter <= 0 {
		return j
	}
	j.scale = float64(cfg.Jitter)
	if rho := cfg.Correlation; rho > 0 {
		j.rho = rho
		j.innov = math.Sqrt(1 - rho*rho)
		j.z = rng.NormFloat64() // stationary start
	}
	return j
}

// next returns the signed offset to add to the base delay of the next
// packet: 0 when Jitter is 0, otherwise a draw of the configured shape,
// rounded to the nanosecond.
func (j *jitter) next() time.Duration {
	if j.scale == 0 {
		return 0
	}
	z := j.rng.NormFloat64()
	if j.rho > 0 {
		z = j.rho*j.z + j.innov*z
		j.z = z
	}
	return scaleJitter(standardJitter(j.shape, z), j.scale)
}

// scaleJitter turns a standardized draw s into an offset of scale
// nanoseconds per unit, clamping s to ±maxJitterSigma first (which also
// maps ±Inf to the bound) and saturating at time.Duration's range for
// absurdly large scales.
func scaleJitter(s, scale float64) time.Duration {
	s = max(-maxJitterSigma, min(maxJitterSigma, s))
	ns := math.Round(s * scale)
	// float64(math.MaxInt64) is 2^63, itself out of range.
	const limit = float64(math.MaxInt64)
	switch {
	case ns >= limit:
		return math.MaxInt64
	case ns <= -limit:
		return math.MinInt64
	}
	return time.Duration(ns)
}

// standardJitter maps a standard normal z to a draw of shape with the
// scale Jitter = 1, as Q(Φ(z)). Every map is increasing in z.
func standardJitter(shape Distribution, z float64) float64 {
	switch shape {
	case Normal:
		return z
	case Pareto:
		return (paretoX(z) - paretoMean) / paretoSD
	case ParetoNormal:
		return (z/4 + paretoX(z) - paretoMean) / paretoNormalSD
	default: // Uniform
		// 2Φ(z) - 1 = erf(z/√2), uniform in [-1, 1], without the
		// cancellation of computing Φ first.
		return math.Erf(z / math.Sqrt2)
	}
}

// paretoX returns the Pareto (alpha 3, minimum 1) quantile at u = Φ(z):
// (1-u)^(-1/3), with 1-u = Φ(-z) = erfc(z/√2)/2 computed directly so that
// the heavy upper tail (u near 1) keeps its precision. For z beyond about
// 37 the tail probability underflows to 0 and the result is +Inf, which
// next clamps.
func paretoX(z float64) float64 {
	return math.Cbrt(2 / math.Erfc(z/math.Sqrt2))
}
