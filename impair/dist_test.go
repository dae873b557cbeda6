package impair

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

// The jitter tests compare dist.go with reference shapes written here from
// their definitions (the Pareto CDF, netem's table generators), as
// functions g(z) = Q(Φ(z)) of the latent standard normal z, with the scale
// Jitter = 1. Moments and correlations of the references come from
// numerical integration against the normal density, not from samples.
// Tolerances follow loss_test.go: tolSD standard deviations of the
// estimate, with its variance derived below for each statistic.

// refPhiUpper is Φ(-z) = P(Z > z).
func refPhiUpper(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }

// refPareto is the Pareto (alpha 3, minimum 1) variate at u = Φ(z):
// F(x) = 1 - x^-3, so x = (1-u)^(-1/3).
func refPareto(z float64) float64 { return math.Pow(refPhiUpper(z), -1.0/3) }

// refClamp applies the documented bound on standardized draws.
func refClamp(s float64) float64 { return math.Max(-maxJitterSigma, math.Min(maxJitterSigma, s)) }

// refNetemParetoNormal is the unscaled entry of iproute2's paretonormal
// table at u = Φ(z): (normal + 3·pareto)/4 with pareto = (x - 1.5)·4/3.
func refNetemParetoNormal(z float64) float64 {
	return (z + 3*(refPareto(z)-1.5)*4/3) / 4
}

type refShape struct {
	dist Distribution
	g    func(z float64) float64
}

// refShapes returns the reference shapes; the paretonormal scale comes
// from numerical integration.
func refShapes() []refShape {
	pnSD := math.Sqrt(normalExpect(func(z float64) float64 {
		x := refNetemParetoNormal(z)
		return x * x
	}))
	return []refShape{
		{Uniform, func(z float64) float64 { return 1 - 2*refPhiUpper(z) }},
		{Normal, func(z float64) float64 { return z }},
		{Pareto, func(z float64) float64 { return refClamp((refPareto(z) - 1.5) / math.Sqrt(0.75)) }},
		{ParetoNormal, func(z float64) float64 { return refClamp(refNetemParetoNormal(z) / pnSD) }},
	}
}

// normalExpect returns E[f(Z)], Z ~ N(0, 1), by the trapezoid rule on
// [-40, 38] (beyond 38 the Pareto tail probability underflows). The rule
// converges fast for smooth integrands with Gaussian decay.
func normalExpect(f func(float64) float64) (sum float64) {
	const h = 1e-3
	for z := -40.0; z <= 38; z += h {
		sum += f(z) * math.Exp(-z*z/2)
	}
	return sum * h / math.Sqrt(2*math.Pi)
}

// lagMoments returns E[d(Z1)·d(Z2)] and E[(d(Z1)·d(Z2))²], d = g - mean,
// for standard normals Z1, Z2 with correlation rho: the expectation over
// Z1 and an independent W with Z2 = rho·Z1 + √(1-rho²)·W, by the trapezoid
// rule on [-10, 10]² (the density beyond is below 1e-22).
func lagMoments(rho float64, g func(float64) float64, mean float64) (c, y2 float64) {
	const h, lim = 0.02, 10.0
	k := math.Sqrt(1 - rho*rho)
	for x := -lim; x <= lim; x += h {
		wx, dx := math.Exp(-x*x/2), g(x)-mean
		for w := -lim; w <= lim; w += h {
			y := dx * (g(rho*x+k*w) - mean)
			p := wx * math.Exp(-w*w/2)
			c += p * y
			y2 += p * y * y
		}
	}
	norm := h * h / (2 * math.Pi)
	return c * norm, y2 * norm
}

// refMoments returns the mean, variance and fourth central moment of a
// reference shape.
func refMoments(g func(float64) float64) (mean, variance, m4 float64) {
	mean = normalExpect(g)
	variance = normalExpect(func(z float64) float64 { d := g(z) - mean; return d * d })
	m4 = normalExpect(func(z float64) float64 { d := g(z) - mean; return d * d * d * d })
	return mean, variance, m4
}

func TestParetoNormalSD(t *testing.T) {
	// The constant in dist.go against quadrature of netem's formula.
	got := math.Sqrt(normalExpect(func(z float64) float64 {
		x := refNetemParetoNormal(z)
		return x * x
	}))
	if math.Abs(got-paretoNormalSD) > 1e-9 {
		t.Errorf("paretonormal sd by quadrature %.12f, constant %.12f", got, paretoNormalSD)
	}
	if m := normalExpect(refNetemParetoNormal); math.Abs(m) > 1e-9 {
		t.Errorf("paretonormal mean by quadrature %v, want 0", m)
	}
	if math.Abs(paretoSD*paretoSD-0.75) > 1e-15 {
		t.Errorf("paretoSD² = %v, want 3/4", paretoSD*paretoSD)
	}
}

func TestJitterShapes(t *testing.T) {
	// Pointwise: dist.go's map from z equals the reference, and increases
	// (so the copula keeps the order of the latent normals; far out,
	// Uniform's erf rounds to ±1).
	for _, ref := range refShapes() {
		prev := math.Inf(-1)
		for z := -9.0; z <= 9; z += 1.0 / 64 {
			got, want := refClamp(standardJitter(ref.dist, z)), ref.g(z)
			if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Fatalf("%v at z=%v: %v, reference %v", ref.dist, z, got, want)
			}
			if got < prev || (got == prev && math.Abs(z) < 5) {
				t.Fatalf("%v does not increase at z=%v", ref.dist, z)
			}
			prev = got
		}
	}
}

func TestJitterScale(t *testing.T) {
	for _, tc := range []struct {
		s, scale float64
		want     time.Duration
	}{
		{0.5, 1e6, 500_000},
		{-0.25, 3, -1}, // -0.75 rounds to -1
		{1.5e-9, 1e9, 2},
		{math.Inf(1), 1e6, maxJitterSigma * 1e6},
		{-5000, 1e6, -maxJitterSigma * 1e6},
		{maxJitterSigma, 1e300, math.MaxInt64},
		{-maxJitterSigma, 1e300, math.MinInt64},
	} {
		if got := scaleJitter(tc.s, tc.scale); got != tc.want {
			t.Errorf("scaleJitter(%v, %v) = %v, want %v", tc.s, tc.scale, got, tc.want)
		}
	}
}

// jitterDraws is the sample size of the statistical jitter tests: a
// million draws (about 0.1 s per shape), a fifth of that with -short. The
// tolerances follow n.
func jitterDraws() int {
	if testing.Short() {
		return 200_000
	}
	return 1_000_000
}

// jitterSample draws n offsets with Jitter = 1 s and returns them in units
// of Jitter.
func jitterSample(dist Distribution, rho float64, seed uint64, n int) []float64 {
	j := newJitter(DelayConfig{Jitter: time.Second, Distribution: dist, Correlation: rho}, newRand(seed, "up", "delay"))
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(j.next()) / float64(time.Second)
	}
	return s
}

// sampleMoments returns the mean and (biased) variance of s.
func sampleMoments(s []float64) (mean, variance float64) {
	for _, x := range s {
		mean += x
	}
	mean /= float64(len(s))
	for _, x := range s {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(s))
}

// lag1 returns the sample lag-1 autocorrelation of s.
func lag1(s []float64) float64 {
	m, v := sampleMoments(s)
	var c float64
	for i := 1; i < len(s); i++ {
		c += (s[i-1] - m) * (s[i] - m)
	}
	return c / float64(len(s)-1) / v
}

// quantileProbs are where the empirical CDF is compared with the
// reference one.
var quantileProbs = []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999}

// checkQuantiles compares the fraction of sorted draws below the
// reference quantile Q(p) = g(Φ⁻¹(p)) with p, within tol(p).
func checkQuantiles(t *testing.T, sorted []float64, g func(float64) float64, tol func(p float64) float64) {
	t.Helper()
	for _, p := range quantileProbs {
		q := g(math.Sqrt2 * math.Erfinv(2*p-1))
		got := float64(sort.SearchFloat64s(sorted, q)) / float64(len(sorted))
		if math.Abs(got-p) > tol(p) {
			t.Errorf("P(draw < Q(%v) = %.4f) = %.5f, want %v ± %.5f", p, q, got, p, tol(p))
		}
	}
}

func TestJitterMarginal(t *testing.T) {
	// Independent draws (ρ = 0), n per shape (jitterDraws).
	//   mean:     sd = sqrt(Var/n).
	//   variance: sd = sqrt((m4 - Var²)/n), m4 the fourth central moment.
	//             Pareto's m4 is infinite without the cap and about 6,000
	//             with it, so its variance is checked only to about ±0.35
	//             with a million draws; its CDF below, and
	//             TestJitterShapes, pin the shape tightly.
	//   CDF:      by the Dvoretzky-Kiefer-Wolfowitz inequality the
	//             empirical CDF is within ε of the true one everywhere
	//             except with probability 2·exp(-2nε²); ε = 0.0027 (for a
	//             million draws) makes that 1e-6.
	//   lag-1:    for independent draws r1 has sd 1/sqrt(n), as
	//             Var(x_n·x_{n+1}) = Var².
	n := float64(jitterDraws())
	eps := math.Sqrt(math.Log(2/1e-6) / (2 * n))
	for i, ref := range refShapes() {
		t.Run(ref.dist.String(), func(t *testing.T) {
			mean, variance, m4 := refMoments(ref.g)
			s := jitterSample(ref.dist, 0, uint64(20+i), int(n))
			gotMean, gotVar := sampleMoments(s)
			checkNear(t, "mean/Jitter", gotMean, mean, math.Sqrt(variance/n))
			checkNear(t, "variance/Jitter²", gotVar, variance, math.Sqrt((m4-variance*variance)/n))
			checkNear(t, "lag-1 autocorrelation", lag1(s), 0, 1/math.Sqrt(n))
			slices.Sort(s)
			checkQuantiles(t, s, ref.g, func(float64) float64 { return eps })
			if ref.dist == Uniform {
				// Range [-1, 1]; no draw falls within δ of an end
				// with probability (1-δ/2)^n ≈ e^-14 for δ = 28/n.
				lo, hi, delta := s[0], s[len(s)-1], 28/n
				t.Logf("uniform range [%.7f, %.7f]", lo, hi)
				if lo < -1 || hi > 1 || lo > -1+delta || hi < 1-delta {
					t.Errorf("uniform draws span [%v, %v], want within and close to [-1, 1]", lo, hi)
				}
			}
		})
	}
}

func TestJitterCorrelated(t *testing.T) {
	// Correlated draws, n per shape and ρ (jitterDraws).
	//
	// Every statistic is a sample mean of some h(z_n) or h(z_n, z_{n+1})
	// of the latent AR(1) chain. For a bivariate normal pair with
	// correlation ρ, no functions of the two have a correlation above |ρ|
	// (the maximal correlation, Lancaster 1957), so for h(z_n) the lag-k
	// correlation is at most ρ^k and the variance of the mean at most
	// Var(h)/n·(1+ρ)/(1-ρ). This bounds the sd of the mean, the variance
	// and the CDF at a point (h an indicator: p(1-p)).
	//
	// For the lag-1 covariance, the mean of Y_n = x_n·x_{n+1}, Y_n and
	// Y_{n+1} share z_{n+1} (correlation up to 1) and Y_n, Y_{n+k} (k ≥ 2)
	// are split by the Markov chain at correlation at most ρ^(k-1):
	// Var(mean Y) ≤ Var(Y)/n·(3 + 2ρ/(1-ρ)). The correlation r = C/V
	// errs by about ΔC - r·ΔV; sd(ΔC - rΔV) ≤ sd(ΔC) + r·sd(ΔV).
	//
	// These bounds are loose for Pareto and ParetoNormal, whose Var(x²)
	// and Var(x_n·x_{n+1}) are dominated by the far tail (infinite without
	// maxJitterSigma): their variance and Pearson correlation are only
	// checked coarsely, their quantiles tightly. What pins the dependence
	// of every shape is the last check: the latent normals, recovered from
	// the draws by inverting the reference shape, must have lag-1
	// correlation ρ, an AR(1) estimate with sd sqrt((1-ρ²)/n) (Bartlett).
	n := float64(jitterDraws())
	for k, rho := range []float64{0.5, 0.9} {
		for i, ref := range refShapes() {
			t.Run(fmt.Sprintf("%v/%v", ref.dist, rho), func(t *testing.T) {
				mean, variance, m4 := refMoments(ref.g)
				infl := (1 + rho) / (1 - rho)
				cov, y2 := lagMoments(rho, ref.g, mean)
				wantR, varY := cov/variance, y2-cov*cov
				if ref.dist == Normal && math.Abs(wantR-rho) > 1e-6 {
					t.Fatalf("quadrature gives normal lag-1 correlation %v, want %v", wantR, rho)
				}
				if ref.dist == Uniform && math.Abs(wantR-6/math.Pi*math.Asin(rho/2)) > 1e-6 {
					t.Fatalf("quadrature gives uniform lag-1 correlation %v, want (6/π)asin(ρ/2) = %v",
						wantR, 6/math.Pi*math.Asin(rho/2))
				}

				s := jitterSample(ref.dist, rho, uint64(30+10*k+i), int(n))
				gotMean, gotVar := sampleMoments(s)
				checkNear(t, "mean/Jitter", gotMean, mean, math.Sqrt(variance/n*infl))
				sdV := math.Sqrt((m4 - variance*variance) / n * infl)
				checkNear(t, "variance/Jitter²", gotVar, variance, sdV)
				sdC := math.Sqrt(varY / n * (3 + 2*rho/(1-rho)))
				checkNear(t, "lag-1 autocorrelation", lag1(s), wantR, (sdC+wantR*sdV)/variance)
				checkNear(t, "latent lag-1 autocorrelation", lag1(recoverLatent(s, ref.g)), rho, math.Sqrt((1-rho*rho)/n))

				slices.Sort(s)
				checkQuantiles(t, s, ref.g, func(p float64) float64 {
					return tolSD * math.Sqrt(p*(1-p)/n*infl)
				})
			})
		}
	}
}

// recoverLatent inverts g, increasing, on each draw: binary search in a
// table of g on [-9, 9], then linear interpolation. Draws beyond the table
// (none with a million draws) map to its ends.
func recoverLatent(s []float64, g func(float64) float64) []float64 {
	const h, lim = 1e-3, 9.0
	var zs, gs []float64
	for z := -lim; z <= lim; z += h {
		zs, gs = append(zs, z), append(gs, g(z))
	}
	out := make([]float64, len(s))
	for i, x := range s {
		k := sort.SearchFloat64s(gs, x)
		switch {
		case k == 0:
			out[i] = zs[0]
		case k == len(gs):
			out[i] = zs[len(zs)-1]
		default:
			f := (x - gs[k-1]) / (gs[k] - gs[k-1])
			out[i] = zs[k-1] + f*h
		}
	}
	return out
}

func TestJitterZero(t *testing.T) {
	rng := newRand(1, "up", "delay")
	j := newJitter(DelayConfig{Time: 20 * time.Millisecond, Distribution: Pareto, Correlation: 0.5}, rng)
	for range 100 {
		if d := j.next(); d != 0 {
			t.Fatalf("next() = %v with Jitter 0", d)
		}
	}
	if rng.Uint64() != newRand(1, "up", "delay").Uint64() {
		t.Error("a generator with Jitter 0 consumed random numbers")
	}
}

func TestJitterDeterminism(t *testing.T) {
	for _, d := range []Distribution{Uniform, Normal, Pareto, ParetoNormal} {
		run := func(seed uint64) []time.Duration {
			j := newJitter(DelayConfig{Jitter: 10 * time.Millisecond, Distribution: d, Correlation: 0.3}, newRand(seed, "up", "delay"))
			out := make([]time.Duration, 1000)
			for i := range out {
				out[i] = j.next()
			}
			return out
		}
		a, b, c := run(7), run(7), run(8)
		if !slices.Equal(a, b) {
			t.Errorf("%v: same seed, different offsets", d)
		}
		if slices.Equal(a, c) {
			t.Errorf("%v: different seeds, same offsets", d)
		}
	}
}

func TestJitterAllocs(t *testing.T) {
	for _, d := range []Distribution{Uniform, Normal, Pareto, ParetoNormal} {
		j := newJitter(DelayConfig{Jitter: time.Millisecond, Distribution: d, Correlation: 0.5}, newRand(1, "up", "delay"))
		if a := testing.AllocsPerRun(1000, func() { j.next() }); a != 0 {
			t.Errorf("%v: %v allocations per draw", d, a)
		}
	}
}

func BenchmarkJitterNext(b *testing.B) {
	for _, d := range []Distribution{Uniform, Normal, Pareto, ParetoNormal} {
		for _, rho := range []float64{0, 0.5} {
			b.Run(fmt.Sprintf("%v/rho=%v", d, rho), func(b *testing.B) {
				j := newJitter(DelayConfig{Jitter: time.Millisecond, Distribution: d, Correlation: rho},
					rand.New(rand.NewPCG(1, 2)))
				var sum time.Duration
				b.ReportAllocs()
				for b.Loop() {
					sum += j.next()
				}
				_ = sum
			})
		}
	}
}
