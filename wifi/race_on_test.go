//go:build race

package wifi

// raceEnabled: the race detector slows the simulation about tenfold;
// statistical tests simulate less time under it (and widen their
// confidence intervals accordingly).
const raceEnabled = true
