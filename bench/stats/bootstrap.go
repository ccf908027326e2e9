package stats

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// RatioCI returns a percentile bootstrap interval at the given confidence
// for median(b)/median(a), from resamples independent resamples of each
// side. a and b must be sorted ascending and non-empty. The generator is
// seeded from the values, so equal inputs give equal intervals.
func RatioCI(a, b []float64, confidence float64, resamples int) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(seed(a, b)))
	ca := make([]int, len(a))
	cb := make([]int, len(b))
	ratios := make([]float64, resamples)
	for r := range ratios {
		ratios[r] = resampledMedian(rng, b, cb) / resampledMedian(rng, a, ca)
	}
	slices.Sort(ratios)
	tail := (1 - confidence) / 2
	return quantileSorted(ratios, tail), quantileSorted(ratios, 1-tail)
}

// resampledMedian draws len(s) values of sorted s with replacement and
// returns their median. Counting how often each index is drawn and walking
// the counts finds the order statistics in O(n), without sorting.
func resampledMedian(rng *rand.Rand, s []float64, counts []int) float64 {
	n := len(s)
	clear(counts)
	for range n {
		counts[rng.IntN(n)]++
	}
	lo, hi := (n-1)/2, n/2 // 0-based ranks of the middle value(s)
	var vlo, vhi float64
	seen := 0
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if seen <= lo && lo < seen+c {
			vlo = s[i]
		}
		if seen <= hi && hi < seen+c {
			vhi = s[i]
			break
		}
		seen += c
	}
	return (vlo + vhi) / 2
}

// quantileSorted is the q-quantile of sorted s with linear interpolation
// between order statistics (type 7, the R default).
func quantileSorted(s []float64, q float64) float64 {
	h := q * float64(len(s)-1)
	i := int(math.Floor(h))
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

// seed hashes sorted a and b (with a separator so that moving a value from
// one side to the other changes the seed).
func seed(a, b []float64) (uint64, uint64) {
	h := fnv.New128a()
	var buf [8]byte
	put := func(v uint64) {
		for i := range buf {
			buf[i] = byte(v >> (8 * i))
		}
		h.Write(buf[:])
	}
	for _, x := range a {
		put(math.Float64bits(x))
	}
	put(uint64(len(a)))
	put(0x9e3779b97f4a7c15)
	for _, x := range b {
		put(math.Float64bits(x))
	}
	put(uint64(len(b)))
	sum := h.Sum(nil)
	var s1, s2 uint64
	for i := range 8 {
		s1 |= uint64(sum[i]) << (8 * i)
		s2 |= uint64(sum[8+i]) << (8 * i)
	}
	return s1, s2
}
