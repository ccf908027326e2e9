package stats

import (
	"fmt"
	"reflect"
	"testing"
)

// TestSeededOrder checks the seeded orders: A B B A blocks that either
// side starts about equally often, the same for the same seed, rounds that
// continue across batches, and Next following the order from counts alone.
func TestSeededOrder(t *testing.T) {
	starts := map[string]int{}
	for seed := uint64(1); seed <= 100; seed++ {
		o := Order{Seed: Mix64(seed), Targets: 2}
		all := o.Rounds(0, 10)
		if !reflect.DeepEqual(all, o.Rounds(0, 10)) {
			t.Fatal("the order is not a function of the seed")
		}
		if batched := append(o.Rounds(0, 3), o.Rounds(3, 7)...); !reflect.DeepEqual(batched, all) {
			t.Fatalf("seed %d: batches %v, whole %v", seed, batched, all)
		}
		counts := []int{0, 0}
		for i, want := range all {
			if got := o.Next(counts); got != want {
				t.Fatalf("seed %d: Next(%v) = %d, want %d (order %v)", seed, counts, got, want, all)
			}
			counts[want]++
			if i%4 == 3 {
				b := fmt.Sprint(all[i-3 : i+1])
				if b != "[0 1 1 0]" && b != "[1 0 0 1]" {
					t.Fatalf("seed %d: block %s", seed, b)
				}
				starts[b]++
			}
		}
	}
	if a := starts["[0 1 1 0]"]; a < 200 || a > 300 {
		t.Errorf("side A starts %d of 500 blocks, want about half", a)
	}
	three := Order{Seed: 5, Targets: 3}.Rounds(0, 2)
	if got := fmt.Sprint(three[3:]); got != fmt.Sprint([]int{three[2], three[1], three[0]}) {
		t.Errorf("three targets: second round %s is not the first reversed (%v)", got, three)
	}
}

// TestUnseededOrder checks the A B B A A B order of seed 0, for three targets too.
func TestUnseededOrder(t *testing.T) {
	cases := []struct {
		targets, per int
		want         []int
	}{
		{2, 3, []int{0, 1, 1, 0, 0, 1}},
		{2, 4, []int{0, 1, 1, 0, 0, 1, 1, 0}},
		{3, 2, []int{0, 1, 2, 2, 1, 0}},
		{1, 3, []int{0, 0, 0}},
		{2, 0, []int{}},
	}
	for _, c := range cases {
		if got := (Order{Targets: c.targets}).Rounds(0, c.per); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Order{Targets: %d}.Rounds(0, %d) = %v, want %v", c.targets, c.per, got, c.want)
		}
	}
}
