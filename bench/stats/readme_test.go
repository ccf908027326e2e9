package stats

import (
	"math"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// readmeModels maps the README's names of the noise models to Simulate's.
var readmeModels = map[string]string{
	"normal": "normal", "log-normal": "log-normal", "5% outliers": "outliers", "bimodal": "bimodal",
	"heavy-tailed (log-t₃)": "heavy-tailed", "AR(1)": "AR(1)", "drifting machine": "drift",
}

// readmeTake is how many comparisons of each cell of the README's
// simulation CI runs again: all of a power cell's 500, a quarter of an
// A/A cell's 2,000 (about 25,000 comparisons, a few seconds).
const readmeTake = 500

// readmeClaim is one figure of the README's statistics: a rate printed
// to one decimal, in a cell of the whole run.
type readmeClaim struct {
	name  string
	pct   string // as printed, without the % sign
	cells []SimRow
}

// TestREADMEStatistics holds the README's statistics table to what the
// code does. The table is the seeded whole run (go test ./bench/stats -run
// 'TestSimulation$' -simulate: compare's plan, 2,000 A/A and 500
// comparisons a cell); CI runs the first readmeTake comparisons of each
// cell the README quotes, with the seeds they have in the whole run, so
// its counts are a subsample drawn without replacement from the run the
// README printed. Each printed figure (A/A false "different", power at
// 10% and 20%, and the A/A rate over all cells) must be one that
// subsample can come from: its count lies within z standard deviations of
// the hypergeometric mean for some count the printed (rounded) rate
// allows, z holding the whole table's chance of a false alarm to 1%. A
// power cell is run whole, so its figure must be exactly what the code
// gives. The claimed targets (A/A at most alpha, power at least 95%) are
// checked on the same comparisons (checkTargets).
func TestREADMEStatistics(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	const fullNull, fullReps = 2000, 500 // Simulate's defaults, the README's run
	if !strings.Contains(readme, "105,000 sequential comparisons") {
		t.Fatal("the README no longer says its statistics come from 105,000 comparisons (7 models, 3 noise levels, 2,000 A/A and 6×500 a cell): update this test with the run it quotes")
	}
	type cellKey struct {
		model         string
		noise, effect float64
	}
	type quoted struct {
		label       string
		aa, p10, p2 string
	}
	var rows []quoted
	in := false
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "| noise model, noise | A/A false \"different\" | power 10% | power 20% |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		f := strings.Split(strings.Trim(line, "| "), "|")
		pct := func(s string) string {
			s = strings.TrimSpace(s)
			if _, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64); err != nil || !strings.HasSuffix(s, "%") {
				t.Fatalf("README statistics row %q: %q is not a percentage", line, s)
			}
			return strings.TrimSuffix(s, "%")
		}
		rows = append(rows, quoted{strings.TrimSpace(f[0]), pct(f[1]), pct(f[2]), pct(f[3])})
	}
	if len(rows) != 14 {
		t.Fatalf("found %d rows of the README's statistics table, want 14 (7 models at 5%% and 15%% noise)", len(rows))
	}
	m := regexp.MustCompile(`Over all 42,000 A/A comparisons \(with a 2% noise level too\) ([0-9.]+)% came out`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatal(`the README no longer quotes the A/A rate "Over all 42,000 A/A comparisons ...": update this test`)
	}
	pooled := m[1]

	keep := map[cellKey]bool{}
	for _, name := range readmeModels {
		keep[cellKey{name, 0.02, 0}] = true // the pooled A/A rate counts the 2% noise level too
	}
	var wantRows []cellKey
	for _, r := range rows {
		label, noise, ok := strings.Cut(r.label, ", ")
		model := readmeModels[label]
		n, err := strconv.ParseFloat(strings.TrimSuffix(noise, "%"), 64)
		if !ok || model == "" || err != nil {
			t.Fatalf("README statistics row %q: unknown model or noise", r.label)
		}
		for _, e := range []float64{0, 0.10, 0.20} {
			k := cellKey{model, n / 100, e}
			keep[k] = true
			wantRows = append(wantRows, k)
		}
	}
	got := Simulate(SimConfig{Thresholds: DefaultThresholds, Workers: runtime.GOMAXPROCS(0), Take: readmeTake,
		Only: func(r SimRow) bool { return keep[cellKey{r.Model, r.Noise, r.Effect}] }})
	cells := map[cellKey]SimRow{}
	for _, r := range got {
		cells[cellKey{r.Model, r.Noise, r.Effect}] = r
	}
	var claims []readmeClaim
	for i, r := range rows {
		k := wantRows[3*i : 3*i+3]
		claims = append(claims,
			readmeClaim{r.label + ": A/A false different", r.aa, []SimRow{cells[k[0]]}},
			readmeClaim{r.label + ": power 10%", r.p10, []SimRow{cells[k[1]]}},
			readmeClaim{r.label + ": power 20%", r.p2, []SimRow{cells[k[2]]}})
	}
	var nulls []SimRow
	for _, r := range got {
		if r.Effect == 0 {
			nulls = append(nulls, r)
		}
	}
	claims = append(claims, readmeClaim{"all A/A comparisons: false different", pooled, nulls})

	z := zFor(0.01 / float64(2*len(claims)))
	for _, c := range claims {
		x, n, full := 0, 0, 0
		for _, r := range c.cells {
			x += r.Different
			n += r.Runs
			if r.Effect == 0 {
				full += fullNull
			} else {
				full += fullReps
			}
		}
		if n == 0 {
			t.Fatalf("%s: no comparisons ran", c.name)
		}
		if !fromRounded(x, n, full, c.pct, z) {
			t.Errorf("%s: the README says %s%% of %d; its first %d comparisons (same seeds) give %d (%.1f%%), more than %.2f standard deviations from any count %s%% allows: run go test ./bench/stats -run 'TestSimulation$' -simulate and quote its figures",
				c.name, c.pct, full, n, x, 100*float64(x)/float64(n), z, c.pct)
		}
	}
	checkTargets(t, got, DefaultThresholds)
}

// fromRounded reports whether x successes in the first n of full
// comparisons can come from a whole run whose rate, printed as pct (a
// percentage with its decimals, one where none are printed), rounds to it: for some count X of the
// whole run that prints as pct, x lies within z standard deviations (plus
// half a count) of the hypergeometric mean n·X/full, and within what X
// allows at all.
func fromRounded(x, n, full int, pct string, z float64) bool {
	v, err := strconv.ParseFloat(pct, 64)
	if err != nil {
		return false
	}
	half := 0.05 // the table's figures have one decimal; 100% is 100.0%
	if _, frac, ok := strings.Cut(pct, "."); ok {
		half = 0.5 * math.Pow(10, -float64(len(frac)))
	}
	// X prints as pct when 100·X/full lies in [v-half, v+half).
	lo := int(math.Ceil(float64(full)*(v-half)/100 - 1e-9))
	hi := int(math.Ceil(float64(full)*(v+half)/100-1e-9)) - 1
	for X := max(lo, 0); X <= min(hi, full); X++ {
		if x > X || n-x > full-X {
			continue
		}
		p := float64(X) / float64(full)
		mean := float64(n) * p
		sd := 0.0
		if full > 1 {
			sd = math.Sqrt(float64(n) * p * (1 - p) * float64(full-n) / float64(full-1))
		}
		if math.Abs(float64(x)-mean) <= z*sd+0.5 {
			return true
		}
	}
	return false
}

// zFor is the standard normal quantile with upper tail p.
func zFor(p float64) float64 {
	lo, hi := 0.0, 10.0
	for range 100 {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(mid/math.Sqrt2) > p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func TestFromRounded(t *testing.T) {
	z := zFor(0.005)
	if math.Abs(z-2.5758) > 1e-3 {
		t.Errorf("zFor(0.005) = %g, want 2.576", z)
	}
	for _, c := range []struct {
		x, n, full int
		pct        string
		want       bool
	}{
		{479, 500, 500, "95.8", true},  // a whole cell: exactly its count
		{481, 500, 500, "95.8", false}, // 96.2% printed for a cell that gives 95.8%
		{0, 500, 2000, "0.0", true},    // none in the subsample of a 0.0% cell
		{1, 500, 2000, "0.0", false},   // a 0.0% cell of 2,000 has no false alarm at all
		{4, 500, 2000, "0.8", true},    // 16 of 2,000, a quarter of them
		{22, 500, 2000, "0.8", false},  // 4.4% cannot come from 0.8%
		{500, 500, 500, "100", true},   //
		{499, 500, 500, "100", false},  // 100% printed for a cell of 500 means every one
		{12, 1000, 2000, "1.1", true},  // 22 of 2,000, half of them
		{3, 1000, 2000, "1.1", false},  //
		{223, 42000, 42000, "0.53", true},
		{223, 42000, 42000, "0.59", false}, // the figure the README quoted before the magnitude path
	} {
		if got := fromRounded(c.x, c.n, c.full, c.pct, z); got != c.want {
			t.Errorf("fromRounded(%d of %d of %d, %s%%) = %v, want %v", c.x, c.n, c.full, c.pct, got, c.want)
		}
	}
}
