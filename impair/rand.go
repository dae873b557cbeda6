package impair

import (
	"hash/fnv"
	"math/rand/v2"
)

// newRand returns the random stream of one stage of a direction. Streams of
// different stages are independent, and each depends only on the seed and
// the stage's name, so adding or removing a stage never changes the
// decisions of another.
func newRand(seed uint64, direction, stage string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(direction))
	h.Write([]byte{0})
	h.Write([]byte(stage))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// chance draws a sequence of yes/no decisions with probability p and lag-1
// correlation rho.
//
// netem draws a correlated uniform number, (1-rho)*U + rho*last, and compares
// it with p; the result narrows the distribution, so the long-run rate is not
// p (netem's own documentation calls the feature broken). Here correlation
// is a two-state Markov chain built to have exactly mean p and lag-1
// correlation rho:
//
//	P(yes | last yes) = p + rho*(1-p)
//	P(yes | last no)  = p * (1-rho)
//
// whose stationary probability of "yes" is p. With rho = 0 it is Bernoulli.
type chance struct {
	p, afterYes, afterNo float64
	last                 bool
	rng                  *rand.Rand
}

func newChance(c Chance, rng *rand.Rand) chance {
	return chance{
		p:        c.P,
		afterYes: c.P + c.Correlation*(1-c.P),
		afterNo:  c.P * (1 - c.Correlation),
		rng:      rng,
	}
}

// next draws the next decision.
func (c *chance) next() bool {
	if c.p <= 0 {
		return false
	}
	q := c.afterNo
	if c.last {
		q = c.afterYes
	}
	c.last = c.rng.Float64() < q
	return c.last
}
