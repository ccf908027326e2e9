// Package stats decides whether two samples of one benchmark metric differ.
//
// It is pure: no I/O, no logging, no clocks. Every caveat (too few samples,
// high noise, a change in spread) is returned as data in Comparison.Warnings.
// The design choice that matters: a verdict is three-valued and "same" needs
// evidence too, because one wrong good/bad call sends a bisection into a
// range without the culprit.
//
// # Method
//
// A Comparison looks at a baseline sample A (the older, good build) and a
// candidate sample B (the newer build). Each value is one workload run on a
// freshly started server; the sampler interleaves the runs of A and B so that
// drift hits both sides. This package only decides.
//
//   - Rank tests: a two-sided Mann–Whitney U test (exact for small samples,
//     from github.com/aclements/go-moremath/stats) and a two-sided
//     two-sample Kolmogorov–Smirnov test (KSTest: exact conditional
//     permutation p-value, valid with ties). The decision statistic is
//     P = min(PMannWhitney, PKS/4), a weighted Bonferroni combination: the
//     Mann–Whitney test, which has the power for shifts of location, gets
//     four fifths of the level, and KS, there to catch changes of shape such
//     as a share of runs getting slower, gets one fifth.
//   - Effect: Ratio is the Hodges–Lehmann estimate of the ratio B/A, the
//     median over all pairs of log b - log a, exponentiated; Lo and Hi are
//     its rank-based limits, the differences at the cut where the
//     one-sided Mann–Whitney test of that shift reaches the look's level
//     ShiftAlpha. Under a multiplicative change (B distributed as r·A)
//     the limits miss r with probability at most ShiftAlpha on each side,
//     whatever the distribution of the runs. The same data always give the
//     same Comparison, whatever order the runs arrived in.
//   - Magnitude path (magnitude.go): at the looks where no rank test can
//     reach its level (3 and 5 runs per side with the defaults), a Student
//     t interval of the mean log values, its level a tenth of the error
//     rates split over those looks and scaled down by simulation so that it
//     holds in every noise model. It decides only overwhelming evidence: a
//     +100% change at 10% noise, a 0.5% change of an instruction count
//     whose runs differ by 0.01%, identical runs on both sides. Each side's
//     spread is floored at the measurement's resolution
//     (Thresholds.Resolution, else the smallest gap between two values), so
//     zero spread never divides by zero. [Lo, Hi] is the intersection of
//     the rank interval and this one.
//   - Verdict, at every look:
//     Same when the interval lies inside [1-MinEffect, 1+MinEffect]: two
//     one-sided tests reject a ratio at or beyond either edge (PSame <=
//     ShiftAlpha, or the intersection inside the band), evidence of no
//     change that matters, not merely a missing difference.
//     Regression or Improvement when P < LookAlpha, or the magnitude
//     interval excludes 1 (PMagnitude < 2·MagnitudeAlpha), and the
//     interval (and the ratio) lie on one side of 1, the interval not
//     inside that band. So a "different" needs both a significant test and
//     a shift in a definite direction; its size may be below MinEffect only if the
//     interval reaches beyond it. A real change whose whole interval is
//     within MinEffect is Same, with a warning: for bisecting, a commit that
//     costs 0.5% is not the culprit of a 10% regression.
//     Otherwise Unknown, or Inconclusive once MaxSamples per side is reached.
//
// # Sequential looks
//
// The sampler starts with FirstLook (3) per side, then StartSamples, and adds
// Batch per side after every Unknown look, up to MaxSamples
// (Thresholds.FirstLook, Thresholds.Looks, Thresholds.More). The first
// look only the magnitude path can decide, so the data choose whether a
// comparison ends at 3 runs per side or goes on.
// Testing at every look would inflate the false-positive rate, so each look k
// has its own level LookAlpha(n_k), a group-sequential boundary in the spirit
// of O'Brien–Fleming: every look before the last gets a tenth of the last
// look's level, which keeps nearly all the power of a single test at
// MaxSamples for small effects and still stops early for large ones.
//
// The scale of the boundary is calibrated so that the family-wise rate of a
// false "different" from the rank tests across all looks is at most 0.9
// Alpha; the magnitude path has the other tenth, so that by the union
// bound the total is at most Alpha. Under the null
// hypothesis the runs of A and B are exchangeable, so (for continuous data)
// the ranks at every look are those of a uniformly random labelling whatever
// the distribution of the measurements: the joint null distribution of both
// p-values across the nested looks is the same for every noise model. One
// seeded simulation of null comparisons on uniform values (100,000 for
// Alpha 0.01; 1000/Alpha in general, between 20,000 and 100,000), with
// p-values from exact tables identical to those Compare computes, therefore
// gives the boundary for all of them. The calibration keeps the simulated
// rate 2.33 Monte Carlo standard errors below its share, runs once per Alpha
// and look plan (about a second on two cores) and is cached; the boundary
// of DefaultThresholds is stored precomputed. Compared with plain
// Bonferroni over looks and tests it spends the level where the power is:
// with the defaults the last look tests at 0.0073 and the earlier ones at
// 0.00073.
// Looks at which no p-value can reach the level (n = 5: the smallest
// possible p is 2/C(10,5) = 0.0079) spend nothing. Requiring the interval to
// exclude 1 only lowers the rate. The guarantee assumes the caller looks at
// the planned sizes, as Thresholds.More plans; with ties the tests are
// conditional permutation tests and the boundary is approximate.
//
// The interval has the same kind of boundary (shift.go): the same weights,
// scaled by a null simulation so that over all looks each rank limit
// excludes the true ratio in at most 0.9·(1-Confidence)/2 of the
// comparisons, the magnitude limits in the other tenth. Because
// the test of the true shift is a null test, this holds for every true
// ratio at once: the interval reported at the look where the sampler stops
// holds the true ratio with probability at least Confidence (a repeated
// confidence interval), and a true change of exactly MinEffect ends
// "same" with probability at most (1-Confidence)/2, 2.5% by default,
// however many looks were taken. With the defaults the limits use a
// one-sided level of 0.0019 at 10 to 25 runs per side and 0.019 at 30; at
// 3 and 5 runs per side no rank interval reaches the level, and [Lo, Hi] is
// the magnitude interval.
//
// The package also holds a seeded simulation (Simulate, FormatSimTable) that
// measures false-positive rate, power, false "same" rate, interval
// coverage, inconclusive rate and samples used under noise models seen in
// PostgreSQL benchmarks, including heavy tails, autocorrelation and drift;
// run it with (plans: compare, bisect, check)
//
//	go test ./bench/stats -run 'TestSimulation$' -simulate -simulate.plan compare -simulate.out /tmp/sim.md -v
//
// its study of the samples per side by effect size, tied and constant data
// included, and of the magnitude path's own false "different" rate with
//
//	go test ./bench/stats -run 'TestSampleSizes$|TestMagnitudeNullRate$' -simulate.samples -simulate.out /tmp/samples.md -v
//
// and its check against recorded real noise with
//
//	go test ./bench/stats -run 'TestRealNoise$' -realnoise.full -realnoise.out /tmp/real.md -v
package stats
