// Package stats decides whether two samples of one benchmark metric differ.
//
// It is pure: no I/O, no logging, no clocks. Every caveat (too few samples,
// high noise, a change in spread) is returned as data in Comparison.Warnings.
//
// # Method
//
// A Comparison looks at a baseline sample A (the older, good build) and a
// candidate sample B (the newer build). Each value is one workload run on a
// freshly started server; the sampler interleaves the runs of A and B so that
// drift hits both sides. This package only decides.
//
//   - Location and shape: a two-sided Mann–Whitney U test (exact for small
//     samples, from github.com/aclements/go-moremath/stats) and a two-sided
//     two-sample Kolmogorov–Smirnov test (exact conditional permutation
//     p-value computed here, valid with ties). P is the smaller of the two,
//     so a change in spread or a bimodal shift is not missed; the two tests
//     are paid for with a Bonferroni factor of 2.
//   - Effect: the ratio of medians median(B)/median(A) with a percentile
//     bootstrap confidence interval. The bootstrap generator is seeded from a
//     hash of the sorted inputs, so the same data always gives the same
//     Comparison, whatever order the runs arrived in.
//   - Verdict, checked at every look:
//     Same when the interval lies inside [1-MinEffect, 1+MinEffect] (evidence
//     of no change that matters, not merely a missing difference);
//     Regression or Improvement when P < LookAlpha, the interval excludes 1
//     and the interval is not inside that band. A real change smaller than
//     MinEffect is therefore reported as Same with a warning: for bisecting,
//     a commit that costs 0.5% is not the culprit of a 10% regression.
//     Otherwise Unknown, or Inconclusive once MaxSamples per side is reached.
//
// # Sequential looks
//
// The sampler starts with StartSamples per side and adds Batch per side after
// every Unknown look, up to MaxSamples. Testing at every look inflates the
// false-positive rate, so the family-wise rate Alpha is split evenly over the
// planned looks and the two tests (Bonferroni, a Pocock-like constant
// boundary):
//
//	LookAlpha = Alpha / (2 * K)
//
// where K counts only the looks at which a difference can be significant at
// all: with n values per side the smallest possible two-sided p-value of
// either rank test is 2/C(2n, n), so a look at n = 5 (smallest p 0.0079)
// cannot reject at LookAlpha and spends no alpha. The union bound makes the
// rate of any false "different" across all looks at most Alpha, whatever the
// correlation between looks and tests, and the rank tests need no assumption
// about the distribution of the measurements. Requiring the bootstrap interval
// to exclude 1 as well only lowers the rate. The guarantee assumes the caller
// looks no more than K times, as Thresholds.More plans.
//
// Package bench/stats also holds a seeded simulation (Simulate) that measures
// these properties under noise models seen in PostgreSQL benchmarks.
package stats
