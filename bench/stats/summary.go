package stats

import (
	"math"
	"slices"
)

// Summary describes one sample in the units of the metric.
type Summary struct {
	N                int
	Median, Min, Max float64
	Mean, Stddev     float64 // Stddev is the sample standard deviation (n-1)
	RelStddev        float64 // Stddev/Mean as a fraction (0.05 = 5%); 0 if Mean is 0
}

// Summarize describes xs. It does not modify xs. An empty sample gives the
// zero Summary.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return summarizeSorted(s)
}

func summarizeSorted(s []float64) Summary {
	n := len(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	mean := sum / float64(n)
	ss := 0.0
	for _, x := range s {
		ss += (x - mean) * (x - mean)
	}
	sd := 0.0
	if n > 1 {
		sd = math.Sqrt(ss / float64(n-1))
	}
	rel := 0.0
	if mean != 0 {
		rel = sd / math.Abs(mean)
	}
	return Summary{N: n, Median: medianSorted(s), Min: s[0], Max: s[n-1], Mean: mean, Stddev: sd, RelStddev: rel}
}

func medianSorted(s []float64) float64 {
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
