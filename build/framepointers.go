package build

import "strings"

// FramePointerFlag keeps the frame pointer in every function, so that perf
// can walk the stacks of a profiled build (docs/profiles.md says why it is
// a separate build and not every build's default).
const FramePointerFlag = "-fno-omit-frame-pointer"

// WithFramePointers returns o for a profiled build: the same build with
// frame pointers, under a build key of its own (CFLAGS are part of the
// key). configure uses CFLAGS instead of its default -O2, so -O2 is
// written out when o has no CFLAGS; meson adds c_args to its build type's
// optimisation. Applying it twice changes nothing.
func (o Options) WithFramePointers() Options {
	n := o
	n.Configure = append([]string(nil), o.Configure...)
	n.MesonOptions = append([]string(nil), o.MesonOptions...)
	flags := strings.Fields(o.CFLAGS)
	for _, f := range flags {
		if f == FramePointerFlag {
			return n
		}
	}
	if len(flags) == 0 && !o.Meson {
		flags = append(flags, "-O2")
	}
	n.CFLAGS = strings.Join(append(flags, FramePointerFlag), " ")
	return n
}
