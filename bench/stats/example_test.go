package stats_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// A sampler's loop: measure FirstLook runs per side, then as many more as
// More asks for, until the verdict is decided or the budget is spent.
func ExampleThresholds_More() {
	rng := rand.New(rand.NewPCG(1, 2))
	run := func(seconds float64) float64 { return seconds * (1 + 0.05*rng.NormFloat64()) }

	th := stats.DefaultThresholds
	var good, bad []float64
	var c stats.Comparison
	for more := th.FirstLook(); more > 0; more = th.More(c) {
		for range more { // interleaved: good, bad, good, bad, ...
			good = append(good, run(10.0))
			bad = append(bad, run(11.0))
		}
		c = stats.Compare(good, bad, stats.LowerIsBetter, th)
		fmt.Printf("n=%d: %v\n", c.A.N, c.Verdict)
	}
	fmt.Printf("%+.0f%% worse [%.2f, %.2f]\n", 100*c.Worse(), c.Lo, c.Hi)
	// Output:
	// n=3: unknown
	// n=5: unknown
	// n=10: unknown
	// n=15: unknown
	// n=20: regression
	// +9% worse [1.04, 1.15]
}
