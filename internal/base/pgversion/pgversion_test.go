package pgversion

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in    string
		num   int
		major string
		pre   string
	}{
		{"9.6devel", 90600, "9.6", "devel"},
		{"9.6.24", 90624, "9.6", ""},
		{"9.5beta1", 90500, "9.5", "beta1"},
		{"10beta2", 100000, "10", "beta2"},
		{"10.23", 100023, "10", ""},
		{"15.18", 150018, "15", ""},
		{"17devel", 170000, "17", "devel"},
		{"18rc1", 180000, "18", "rc1"},
	} {
		v, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if v.Num != tc.num || v.Major() != tc.major || v.Pre != tc.pre {
			t.Errorf("Parse(%q) = %d %q %q, want %d %q %q", tc.in, v.Num, v.Major(), v.Pre, tc.num, tc.major, tc.pre)
		}
	}
	for _, bad := range []string{"", "devel", "15.x", "1.2.3.4", "15.2devel", "PostgreSQL 15"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestConstraint(t *testing.T) {
	for _, tc := range []struct {
		c    string
		v    string
		want bool
	}{
		{"<10", "9.6.24", true},
		{"<10", "9.6devel", true},
		{"<10", "10beta1", false},
		{"<10", "10.0", false},
		{"<9.6", "9.5.3", true},
		{"<9.6", "9.6devel", false},
		{">=9.6 <13", "12.1", true},
		{">=9.6,<13", "13devel", false},
		{">=16", "17devel", true},
		{"<=15", "15.18", true},
		{">15", "15.18", false},
		{">15", "16devel", true},
		{"=15", "15.18", true},
		{"=15.4", "15.18", false},
		{"=9.6", "9.6.2", true},
	} {
		c, err := ParseConstraint(tc.c)
		if err != nil {
			t.Fatalf("ParseConstraint(%q): %v", tc.c, err)
		}
		v, err := Parse(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Allows(v); got != tc.want {
			t.Errorf("%q allows %s = %v, want %v", tc.c, tc.v, got, tc.want)
		}
	}
	for _, bad := range []string{"", "10", "~10", "<ten", "<10devel"} {
		if _, err := ParseConstraint(bad); err == nil {
			t.Errorf("ParseConstraint(%q) accepted", bad)
		}
	}
}
