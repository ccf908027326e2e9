package build

import "testing"

func TestWithFramePointers(t *testing.T) {
	for _, c := range []struct {
		in   Options
		want string
	}{
		{Options{}, "-O2 -fno-omit-frame-pointer"},
		{Options{CFLAGS: "-O0 -g"}, "-O0 -g -fno-omit-frame-pointer"},
		{Options{Meson: true}, "-fno-omit-frame-pointer"},
		{Options{CFLAGS: "-O2 -fno-omit-frame-pointer"}, "-O2 -fno-omit-frame-pointer"},
	} {
		got := c.in.WithFramePointers()
		if got.CFLAGS != c.want {
			t.Errorf("%+v: CFLAGS %q, want %q", c.in, got.CFLAGS, c.want)
		}
		if got.WithFramePointers().Hash() != got.Hash() {
			t.Errorf("%+v: applying twice changes the key", c.in)
		}
		if c.in.CFLAGS != c.want && got.Hash() == c.in.Hash() {
			t.Errorf("%+v: a profiled build shares the plain build's key", c.in)
		}
	}
}
