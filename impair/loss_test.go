package impair

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// Statistical tests here use fixed seeds, so they are deterministic; their
// tolerances are nonetheless derived so that a correct implementation
// passes for (almost) any seed and a wrong one fails. A sample mean of n
// draws from a stationary process has standard deviation
//
//	sd = sqrt(σ²/n),  σ² = Var(x) + 2·Σ_{k≥1} Cov(x_0, x_k)
//
// (σ² is the asymptotic variance; for independent draws it is Var(x),
// p(1-p) for a yes/no). We accept within 4.5 sd: a normal deviate exceeds
// that with probability 7e-6, so the handful of checks below all pass for
// all but about one seed in 10,000. For the loss processes, which are
// (hidden) Markov chains, σ² is computed exactly from the chain by
// markovChain.asymVar rather than estimated from the sample.
const tolSD = 4.5

// markovChain is a finite Markov chain with transition matrix p (p[i][j] is
// the probability to go from i to j), used to compute the exact statistics
// of the loss models.
type markovChain [][]float64

// stationary solves πP = π, Σπ = 1 by Gaussian elimination.
func (p markovChain) stationary() []float64 {
	k := len(p)
	// Rows: (P^T - I)π = 0 with the last equation replaced by Σπ = 1.
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k+1)
		for j := range k {
			a[i][j] = p[j][i]
		}
		a[i][i]--
	}
	for j := range k + 1 {
		a[k-1][j] = 1
	}
	for col := range k {
		piv := col
		for r := col + 1; r < k; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[piv][col]) {
				piv = r
			}
		}
		a[col], a[piv] = a[piv], a[col]
		for r := range k {
			if r != col {
				f := a[r][col] / a[col][col]
				for c := col; c <= k; c++ {
					a[r][c] -= f * a[col][c]
				}
			}
		}
	}
	pi := make([]float64, k)
	for i := range k {
		pi[i] = a[i][k] / a[i][i]
	}
	return pi
}

// asymVar returns the mean and the asymptotic variance σ² (n·Var of the
// sample mean, n → ∞) of x_n ~ Bernoulli(e[S_n]), drawn independently
// given the chain's states S_n:
//
//	σ² = E_π[e(1-e)] + Var_π(e) + 2·Σ_{k≥1} Cov_π(e(S_0), e(S_k))
//
// The covariances are summed until they vanish (they decay geometrically).
func (p markovChain) asymVar(e []float64) (mean, v float64) {
	pi := p.stationary()
	for i := range pi {
		mean += pi[i] * e[i]
		v += pi[i] * e[i] * (1 - e[i])
	}
	g := make([]float64, len(e)) // P^k·(e - mean)
	for i := range e {
		g[i] = e[i] - mean
	}
	cov := func() (c float64) {
		for i := range pi {
			c += pi[i] * (e[i] - mean) * g[i]
		}
		return c
	}
	v += cov() // k = 0: Var_π(e)
	next := make([]float64, len(g))
	for k := 1; k < 1e6; k++ {
		for i := range p {
			next[i] = 0
			for j := range p[i] {
				next[i] += p[i][j] * g[j]
			}
		}
		g, next = next, g
		c := cov()
		v += 2 * c
		if math.Abs(c) < 1e-16 {
			break
		}
	}
	return mean, v
}

// decisions draws n decisions from gen: 0 delivered, 1 DropLoss,
// 2 DropBurst.
func decisions(gen lossGen, n int) []uint8 {
	d := make([]uint8, n)
	for i := range d {
		if r, lost := gen.lose(); lost {
			d[i] = 1 + uint8(r)
		}
	}
	return d
}

// lossFraction returns the fraction of decisions that are any loss (match
// 0) or the given reason.
func lossFraction(d []uint8, match uint8) float64 {
	var k int
	for _, x := range d {
		if x != 0 && (match == 0 || x == match) {
			k++
		}
	}
	return float64(k) / float64(len(d))
}

// runs returns the number of completed runs of consecutive losses and the
// mean of their lengths. A run still open at the end is left out.
func runs(d []uint8) (n int, mean float64) {
	var total, cur int
	for _, x := range d {
		if x != 0 {
			cur++
			continue
		}
		if cur > 0 {
			n++
			total += cur
			cur = 0
		}
	}
	return n, float64(total) / float64(n)
}

// checkNear fails t unless |got-want| <= tolSD·sd, and logs the comparison.
func checkNear(t *testing.T, what string, got, want, sd float64) {
	t.Helper()
	t.Logf("%-34s got %.5f want %.5f ± %.5f (%.2f sd)", what, got, want, tolSD*sd, (got-want)/sd)
	if math.Abs(got-want) > tolSD*sd {
		t.Errorf("%s = %.5f, want %.5f ± %.5f (%.1f sd off)", what, got, want, tolSD*sd, (got-want)/sd)
	}
}

func TestLossRandomBernoulli(t *testing.T) {
	// 100,000 packets at p = 5%: sd = sqrt(p(1-p)/n) = 0.00069.
	const n, p = 100_000, 0.05
	d := decisions(&randomLoss{newChance(Chance{P: p}, newRand(1, "up", "loss"))}, n)
	checkNear(t, "loss rate", lossFraction(d, 0), p, math.Sqrt(p*(1-p)/n))
	// Independent draws: the lag-1 correlation estimate has sd 1/sqrt(n).
	checkNear(t, "lag-1 autocorrelation", lag1Binary(d), 0, 1/math.Sqrt(n))
	if got := lossFraction(d, 1+uint8(DropBurst)); got != 0 {
		t.Errorf("random loss reported %v as bursts", got)
	}
}

// lag1Binary estimates the lag-1 autocorrelation of a yes/no sequence as
// P(yes | previous yes) - P(yes | previous no). For a stationary two-state
// chain that difference is its second eigenvalue, the lag-1 (indeed, with
// its powers, every lag) correlation.
func lag1Binary(d []uint8) float64 {
	var n [2][2]float64
	for i := 1; i < len(d); i++ {
		n[min(d[i-1], 1)][min(d[i], 1)]++
	}
	return n[1][1]/(n[1][0]+n[1][1]) - n[0][1]/(n[0][0]+n[0][1])
}

func TestLossRandomCorrelated(t *testing.T) {
	for _, rho := range []float64{0.5, 0.9} {
		t.Run(fmt.Sprint(rho), func(t *testing.T) {
			const n, p = 100_000, 0.05
			c := newChance(Chance{P: p, Correlation: rho}, newRand(2, "up", "loss"))
			d := decisions(&randomLoss{c}, n)

			// The decisions are the two-state chain of chance. Its
			// asymptotic variance is p(1-p)·(1+ρ)/(1-ρ) (lag-k
			// correlation ρ^k); asymVar must agree.
			chain := markovChain{{1 - c.afterNo, c.afterNo}, {1 - c.afterYes, c.afterYes}}
			mean, v := chain.asymVar([]float64{0, 1})
			if want := p * (1 - p) * (1 + rho) / (1 - rho); math.Abs(v-want) > 1e-9 || math.Abs(mean-p) > 1e-12 {
				t.Fatalf("asymVar = %v, %v; want %v, %v", mean, v, p, want)
			}
			checkNear(t, "loss rate", lossFraction(d, 0), p, math.Sqrt(v/n))

			// The estimate a-b of ρ = a-b (a = P(yes|yes), b =
			// P(yes|no)) has variance a(1-a)/(n·p) + b(1-b)/(n·(1-p)):
			// binomial proportions over the n·p and n·(1-p)
			// transitions leaving each state.
			a, b := c.afterYes, c.afterNo
			sd := math.Sqrt(a*(1-a)/(n*p) + b*(1-b)/(n*(1-p)))
			checkNear(t, "lag-1 autocorrelation", lag1Binary(d), rho, sd)
		})
	}
}

func TestLossGilbertElliott(t *testing.T) {
	// A general Gilbert-Elliott channel: rare bad periods of mean length
	// 1/r, heavy loss inside them, light loss outside.
	cfg := LossConfig{Model: LossGE, P: 0.05, R: 0.3, OneMinusH: 0.7, OneMinusK: 0.01}
	const n = 200_000
	d := decisions(newGilbertElliott(cfg, newRand(3, "up", "loss")), n)

	piB := cfg.P / (cfg.P + cfg.R)
	want := (1-piB)*cfg.OneMinusK + piB*cfg.OneMinusH // 0.10857
	chain := markovChain{{1 - cfg.P, cfg.P}, {cfg.R, 1 - cfg.R}}
	mean, v := chain.asymVar([]float64{cfg.OneMinusK, cfg.OneMinusH})
	if math.Abs(mean-want) > 1e-12 {
		t.Fatalf("stationary loss %v, closed form %v", mean, want)
	}
	checkNear(t, "loss rate", lossFraction(d, 0), want, math.Sqrt(v/n))

	// Each state's share: Good's losses are DropLoss, Bad's DropBurst.
	good, vg := chain.asymVar([]float64{cfg.OneMinusK, 0})
	bad, vb := chain.asymVar([]float64{0, cfg.OneMinusH})
	checkNear(t, "loss rate in Good (DropLoss)", lossFraction(d, 1+uint8(DropLoss)), good, math.Sqrt(vg/n))
	checkNear(t, "loss rate in Bad (DropBurst)", lossFraction(d, 1+uint8(DropBurst)), bad, math.Sqrt(vb/n))
}

func TestLossSimpleGilbert(t *testing.T) {
	// Simple Gilbert (1-k = 0, 1-h = 1): a packet is lost exactly when
	// the chain is in Bad, so runs of losses are the chain's stays in Bad,
	// independent and geometric with mean 1/r and variance (1-r)/r².
	cfg := LossConfig{Model: LossGE, P: 0.02, R: 0.25, OneMinusH: 1, OneMinusK: 0}
	const n = 400_000
	d := decisions(newGilbertElliott(cfg, newRand(4, "up", "loss")), n)

	piB := cfg.P / (cfg.P + cfg.R)
	_, v := markovChain{{1 - cfg.P, cfg.P}, {cfg.R, 1 - cfg.R}}.asymVar([]float64{0, 1})
	checkNear(t, "loss rate", lossFraction(d, 0), piB, math.Sqrt(v/n))

	// About n·πB·r = 7,400 runs: sd of their mean = sqrt((1-r)/r²/runs).
	k, mean := runs(d)
	checkNear(t, "mean burst length", mean, 1/cfg.R, math.Sqrt((1-cfg.R)/(cfg.R*cfg.R)/float64(k)))
	if got := lossFraction(d, 1+uint8(DropLoss)); got != 0 {
		t.Errorf("losses in Good with 1-k = 0: %v", got)
	}
}

func TestLossGilbertElliottOrder(t *testing.T) {
	// With p = 1, r = 0 the chain enters Bad after the first packet and
	// stays. The first packet must be judged by Good (1-k = 0: delivered),
	// every later one by Bad (1-h = 1: lost), as netem does.
	g := newGilbertElliott(LossConfig{Model: LossGE, P: 1, R: 0, OneMinusH: 1}, newRand(5, "up", "loss"))
	want := []uint8{0, 1 + uint8(DropBurst), 1 + uint8(DropBurst), 1 + uint8(DropBurst)}
	if got := decisions(g, len(want)); !slices.Equal(got, want) {
		t.Errorf("decisions %v, want %v", got, want)
	}
}

// fourStateChain returns the transition matrix of the 4-state model with
// states 1..4 at indices 0..3.
func fourStateChain(c LossConfig) markovChain {
	return markovChain{
		{1 - c.P13 - c.P14, 0, c.P13, c.P14},
		{0, 1 - c.P23, c.P23, 0},
		{c.P31, c.P32, 1 - c.P31 - c.P32, 0},
		{1, 0, 0, 0},
	}
}

func TestLossFourState(t *testing.T) {
	// Every transition in use: gaps broken by isolated losses (p14) or
	// bursts (p13); bursts mixing losses and receptions (p32, p23) until
	// they return to a gap (p31).
	cfg := LossConfig{Model: LossState, P13: 0.02, P14: 0.01, P31: 0.3, P32: 0.3, P23: 0.2}
	const n = 400_000
	d := decisions(newFourState(cfg, newRand(6, "up", "loss")), n)

	chain := fourStateChain(cfg)
	pi := chain.stationary()
	t.Logf("stationary distribution π1..π4 = %.5f", pi)
	_, v := chain.asymVar([]float64{0, 0, 1, 1})
	checkNear(t, "loss rate", lossFraction(d, 0), pi[2]+pi[3], math.Sqrt(v/n))
	_, v3 := chain.asymVar([]float64{0, 0, 1, 0})
	checkNear(t, "burst losses (state 3, DropBurst)", lossFraction(d, 1+uint8(DropBurst)), pi[2], math.Sqrt(v3/n))
	_, v4 := chain.asymVar([]float64{0, 0, 0, 1})
	checkNear(t, "isolated losses (state 4, DropLoss)", lossFraction(d, 1+uint8(DropLoss)), pi[3], math.Sqrt(v4/n))

	// Mean length of a run of consecutive losses. A run starts with a
	// step from a received state into a lost one: 1 → 4 (an isolated
	// loss, length 1, since 4 → 1) or 1 → 3, 2 → 3 (a burst, whose length
	// is geometric with exit probability q = p31+p32: mean 1/q, variance
	// (1-q)/q²). Runs start at rate π1(p13+p14) + π2·p23 per packet, so
	// the mean is the loss rate over that rate.
	q := cfg.P31 + cfg.P32
	startIso, startBurst := pi[0]*cfg.P14, pi[0]*cfg.P13+pi[1]*cfg.P23
	wantMean := (pi[2] + pi[3]) / (startIso + startBurst)
	// Its sd: the run lengths L_k are independent given their types T_k
	// (isolated or burst), so Var(Σ(L_k - μ)) = N·wB·(1-q)/q² (within
	// types) + the variance of Σ m(T_k) for the two-state chain of
	// types, whose second eigenvalue is λ = P(iso|iso) - P(iso|burst) =
	// a - a·b with a = p14/(p13+p14) (a run from state 1 is isolated)
	// and b = p31/q (a burst ends into 1, not 2): N·wI·wB·(1/q-1)²·
	// (1+λ)/(1-λ).
	wI := startIso / (startIso + startBurst)
	wB := 1 - wI
	a, b := cfg.P14/(cfg.P13+cfg.P14), cfg.P31/q
	lambda := a - a*b
	perRun := wB*(1-q)/(q*q) + wI*wB*(1/q-1)*(1/q-1)*(1+lambda)/(1-lambda)
	k, mean := runs(d)
	checkNear(t, "mean burst length", mean, wantMean, math.Sqrt(perRun/float64(k)))
}

func TestLossFourStateBernoulli(t *testing.T) {
	// netem's man page: p13 alone (iproute2 then sets p31 = 1-p13) is
	// the Bernoulli model. Every step from 1 or 3 goes to 3 with p13.
	const n, p = 100_000, 0.03
	cfg := LossConfig{Model: LossState, P13: p, P31: 1 - p, P23: 1}
	d := decisions(newFourState(cfg, newRand(7, "up", "loss")), n)
	checkNear(t, "loss rate", lossFraction(d, 0), p, math.Sqrt(p*(1-p)/n))
	checkNear(t, "lag-1 autocorrelation", lag1Binary(d), 0, 1/math.Sqrt(n))
}

func TestLossFourStateWalk(t *testing.T) {
	// Deterministic edges: p14 = 1 alternates 1 → 4 → 1; from 3, p32 = 1
	// goes to 2 and p23 = 1 back to 3.
	iso := newFourState(LossConfig{Model: LossState, P14: 1}, newRand(8, "up", "loss"))
	L, B := 1+uint8(DropLoss), 1+uint8(DropBurst)
	if got, want := decisions(iso, 6), []uint8{L, 0, L, 0, L, 0}; !slices.Equal(got, want) {
		t.Errorf("p14 = 1: %v, want %v", got, want)
	}
	burst := newFourState(LossConfig{Model: LossState, P13: 1, P32: 1, P23: 1}, newRand(8, "up", "loss"))
	if got, want := decisions(burst, 6), []uint8{B, 0, B, 0, B, 0}; !slices.Equal(got, want) {
		t.Errorf("p13 = p32 = p23 = 1: %v, want %v", got, want)
	}
}

// lossConfigs are the models the stage tests and benchmarks run.
var lossConfigs = []struct {
	name string
	cfg  LossConfig
}{
	{"random", LossConfig{Model: LossRandom, P: 0.1}},
	{"random-corr", LossConfig{Model: LossRandom, P: 0.1, Correlation: 0.5}},
	{"gemodel", LossConfig{Model: LossGE, P: 0.05, R: 0.3, OneMinusH: 0.7, OneMinusK: 0.01}},
	{"state", LossConfig{Model: LossState, P13: 0.02, P14: 0.01, P31: 0.3, P32: 0.3, P23: 0.2}},
}

func TestLossDeterminism(t *testing.T) {
	for _, tc := range lossConfigs {
		t.Run(tc.name, func(t *testing.T) {
			run := func(seed uint64) []uint8 {
				s := newLossStage(tc.cfg, newRand(seed, "up", "loss")).(*lossStage)
				return decisions(s.gen, 10_000)
			}
			a, b, c := run(42), run(42), run(43)
			if !slices.Equal(a, b) {
				t.Error("same seed, different decisions")
			}
			if slices.Equal(a, c) {
				t.Error("different seeds, same decisions")
			}
		})
	}
}

func TestLossStage(t *testing.T) {
	for _, tc := range lossConfigs {
		t.Run(tc.name, func(t *testing.T) {
			s := newLossStage(tc.cfg, newRand(9, "up", "loss"))
			if s.Name() != "loss" {
				t.Errorf("Name() = %q", s.Name())
			}
			if _, ok := s.Next(); ok {
				t.Error("Next reports work on a stage that holds nothing")
			}
			pool := NewPool(64)
			sink := &recordSink{}
			start := time.Unix(100, 0)
			const n = 1000
			var dropped int
			var bytes uint64
			for i := range n {
				p := pool.Get(10 + i%50)
				now := start.Add(time.Duration(i))
				s.Push(now, p, sink)
				if k := len(sink.pkts); k > 0 && sink.pkts[k-1] == p {
					// Forwarded at once, at the time it came in.
					if !sink.times[k-1].Equal(now) {
						t.Fatalf("packet %d forwarded at %v, pushed at %v", i, sink.times[k-1], now)
					}
					bytes += uint64(p.Len())
					continue
				}
				dropped++
				if p.Data != nil {
					t.Fatalf("packet %d neither forwarded nor released", i)
				}
			}
			c := s.Counters()
			out, drops := c.OutPackets.Load(), c.Drops[DropLoss].Load()+c.Drops[DropBurst].Load()
			if c.InPackets.Load() != n || out != uint64(len(sink.pkts)) || drops != uint64(dropped) || out+drops != n {
				t.Fatalf("in %d, out %d, drops %d; delivered %d, dropped %d", c.InPackets.Load(), out, drops, len(sink.pkts), dropped)
			}
			if drops == 0 || out == 0 {
				t.Fatalf("%d drops of %d: test does not exercise both paths", drops, n)
			}
			if c.OutBytes.Load() != bytes {
				t.Errorf("OutBytes %d, delivered %d bytes", c.OutBytes.Load(), bytes)
			}
		})
	}
}

func TestLossAllocs(t *testing.T) {
	for _, tc := range lossConfigs {
		t.Run(tc.name, func(t *testing.T) {
			s := newLossStage(tc.cfg, newRand(10, "up", "loss"))
			sink := &recordSink{pkts: make([]*Packet, 0, 1), times: make([]time.Time, 0, 1)}
			p := &Packet{Data: make([]byte, 100)} // no pool: Release is a no-op
			now := time.Unix(0, 0)
			if a := testing.AllocsPerRun(1000, func() {
				s.Push(now, p, sink)
				sink.pkts, sink.times = sink.pkts[:0], sink.times[:0]
			}); a != 0 {
				t.Errorf("%v allocations per packet", a)
			}
		})
	}
}

func BenchmarkLoss(b *testing.B) {
	for _, tc := range lossConfigs {
		b.Run(tc.name, func(b *testing.B) {
			s := newLossStage(tc.cfg, newRand(11, "up", "loss"))
			sink := &recordSink{pkts: make([]*Packet, 0, 1), times: make([]time.Time, 0, 1)}
			p := &Packet{Data: make([]byte, 1500)}
			now := time.Unix(0, 0)
			b.ReportAllocs()
			for b.Loop() {
				s.Push(now, p, sink)
				sink.pkts, sink.times = sink.pkts[:0], sink.times[:0]
			}
			c := s.Counters()
			b.ReportMetric(float64(c.InPackets.Load()-c.OutPackets.Load())/float64(c.InPackets.Load()), "drop-rate")
		})
	}
}
