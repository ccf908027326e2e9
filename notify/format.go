package notify

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// value formats a measured value with about four significant digits and no
// exponent, followed by its unit: 14.18 s, 31245 tps, 0.001234 s.
func value(v float64, unit string) string {
	s := number(v)
	if unit != "" {
		// Counts in millions and more read as people say them:
		// 700.88 M instructions, 3.18 M rows/s.
		switch a := math.Abs(v); {
		case a >= 1e9 && !math.IsInf(a, 0):
			s = strconv.FormatFloat(v/1e9, 'f', 2, 64) + " G"
		case a >= 1e6:
			s = strconv.FormatFloat(v/1e6, 'f', 2, 64) + " M"
		}
		s += " " + unit
	}
	return s
}

func number(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	if v == 0 {
		return "0"
	}
	mag := int(math.Floor(math.Log10(math.Abs(v))))
	dec := 3 - mag
	if dec < 0 {
		dec = 0
	}
	if dec > 9 {
		dec = 9
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// side formats one side: "14.18 s ± 1.2%".
func side(s finding.Side, unit string) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%s ± %.1f%%", value(s.Median, unit), s.RelStddev*100)
}

// interval formats a ratio interval as percent changes: "+8.9% to +12.0%".
func interval(lo, hi float64, sep string) string {
	return pct(lo) + sep + pct(hi)
}

// pvalue formats a p-value: "0.61", "0.0002", "<0.0001".
func pvalue(p float64) string {
	switch {
	case math.IsNaN(p) || p < 0:
		return "-"
	case p < 0.0001:
		return "<0.0001"
	case p < 0.01:
		return strconv.FormatFloat(p, 'f', 4, 64)
	}
	return strconv.FormatFloat(p, 'f', 2, 64)
}

// confidence formats a confidence level: 0.95 -> "95%".
func confidence(c float64) string {
	if c <= 0 || c >= 1 {
		return "95%"
	}
	return strconv.FormatFloat(c*100, 'f', -1, 64) + "%"
}

// dur formats a duration for people: "2h13m", "4m05s", "12s".
func dur(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// stamp formats a time in UTC to the minute.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// day formats a date.
func day(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02")
}

// directionWord says which way is better in a few words.
func directionWord(d stats.Direction) string {
	switch d {
	case stats.LowerIsBetter:
		return "lower is better"
	case stats.HigherIsBetter:
		return "higher is better"
	}
	return ""
}

// memory formats megabytes: "15.6 GiB".
func memory(mb int64) string {
	if mb >= 1024 {
		return fmt.Sprintf("%.1f GiB", float64(mb)/1024)
	}
	return fmt.Sprintf("%d MiB", mb)
}
