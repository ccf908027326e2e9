package stats

// Order is the order in which an interleaved comparison samples its
// targets, the one order of every comparison pgbisect makes (bench's
// sampling loop and the bisection planner). Samples come in rounds, each
// target once per round, and rounds in blocks of two, the second round the
// reverse of the first (A B B A), so a steady drift of the machine adds the
// same to every target on average. Which target starts a block is what
// Seed decides:
//
//   - Seed 0: target 0 starts every block (A B B A A B B A ...), the order
//     of samplers before orders were seeded. Side A then always runs first
//     in a comparison and after every look.
//   - Any other seed: each block's first round is a permutation drawn from
//     (Seed, block), so either side starts a block equally often (A B B A
//     B A A B ...) and a state left by the previous sample (written-back
//     pages, a warm cache, a checkpoint) falls on both sides alike.
//
// An Order is a pure function of its fields: a resumed comparison that
// keeps its seed and its sample counts continues exactly.
type Order struct {
	Seed    uint64 `json:"seed"`
	Targets int    `json:"targets"`
}

// Round returns the targets of round r in the order they are sampled.
func (o Order) Round(r int) []int {
	first := o.blockStart(r / 2)
	if r%2 == 0 {
		return first
	}
	rev := make([]int, len(first))
	for i, t := range first {
		rev[len(first)-1-i] = t
	}
	return rev
}

// Rounds returns the sample order of rounds from .. from+n-1: indexes into
// the targets, n of each.
func (o Order) Rounds(from, n int) []int {
	order := make([]int, 0, o.Targets*n)
	for r := from; r < from+n; r++ {
		order = append(order, o.Round(r)...)
	}
	return order
}

// Next returns the target to sample next in a comparison whose targets
// have taken counts[i] samples each: the target with fewest samples
// (the first of them in its round's order), so a comparison resumed from
// its sample counts alone continues the order, and one whose sides share
// samples with earlier comparisons evens them out first.
func (o Order) Next(counts []int) int {
	low := counts[0]
	for _, c := range counts {
		low = min(low, c)
	}
	for _, t := range o.Round(low) {
		if counts[t] == low {
			return t
		}
	}
	return 0
}

// blockStart returns the first round of block b: the identity for seed 0,
// otherwise a Fisher-Yates shuffle driven by splitmix64 of (Seed, b), a
// generator fixed here so that the order never changes with the Go
// version. With two targets, target Mix64(Seed^(b+1)·φ)&1 starts the block
// (the order bisections have used since their orders were seeded).
func (o Order) blockStart(b int) []int {
	p := make([]int, o.Targets)
	for i := range p {
		p[i] = i
	}
	if o.Seed == 0 {
		return p
	}
	x := o.Seed ^ (uint64(b)+1)*0x9e3779b97f4a7c15
	for i := len(p) - 1; i > 0; i-- {
		x = Mix64(x)
		j := i - int(x%uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// Mix64 is splitmix64's finalizer: a fixed bijection of uint64 that
// scatters neighbouring inputs, the same on every Go version. It derives
// the seeds of related orders (one per comparison) from one seed.
func Mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// SeedOf is the order seed named by s (a bisection's ID, a nightly run's
// scenario and point, the commits of a revert check): FNV-1a of s,
// scattered by Mix64, never 0 (0 is the unseeded order).
func SeedOf(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return Mix64(h) | 1
}
