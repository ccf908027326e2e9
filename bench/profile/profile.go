// Package profile records CPU profiles of a PostgreSQL server with perf,
// keeps them as folded stacks, and compares two sets of profiled runs:
// which functions' share of the CPU grew, how sure that is, and a
// differential flame graph.
//
// The design choice that matters: a profile is compared run by run. Each
// profiled run gives one share per function, and the two sides' shares go
// through a rank test, so a difference is only as sure as the runs agree;
// pooling the samples of all runs as if they were independent would make
// any difference look certain. A profile is evidence, never a verdict: the
// judged metric stays the timing measured without the profiler.
package profile

import (
	"bufio"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Profile is one profiled run, symbolised and folded.
type Profile struct {
	// Stacks maps a stack, root first with frames joined by ";", to the
	// samples taken in it.
	Stacks map[string]int `json:"stacks,omitempty"`
	// Samples is the total of Stacks.
	Samples int `json:"samples"`
	// Warning says why there is no profile (perf missing, no permission)
	// or why it is thin; "" when all went well.
	Warning string `json:"warning,omitempty"`
}

// Share is a function's fraction (0..1) of a profile's samples: Self
// counts the samples where it ran itself (the leaf), Inclusive those
// where it is anywhere on the stack (once per sample, however deep it
// recurses).
type Share struct {
	Self      float64 `json:"self"`
	Inclusive float64 `json:"inclusive"`
}

// ParseScript folds the output of "perf script --show-task-events -F
// comm,pid,tid,ip,sym,dso" (a header line per sample, then one indented
// frame per line, leaf first, then a blank line). When roots is not
// empty only samples of those processes and of the processes they fork
// during the recording (PERF_RECORD_FORK lines) are kept: perf records
// the whole machine, since "perf record -p" does not follow children
// forked after it attaches, and other servers may be running.
//
// A frame with a symbol is its name; one without, in a known object, is
// "[object]"; frames with neither (the garbage a frame-pointer walk
// yields through code built without frame pointers) are dropped.
func ParseScript(r io.Reader, roots []int) (Profile, error) {
	type sample struct {
		pid    int
		frames []string
	}
	var samples []sample
	forks := map[int][]int{} // parent pid -> children
	var cur *sample
	flush := func() {
		if cur == nil {
			return
		}
		if len(cur.frames) == 0 {
			cur.frames = append(cur.frames, "[unknown]")
		}
		samples = append(samples, *cur)
		cur = nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] != ' ' && line[0] != '\t':
			flush()
			if m := forkLine.FindStringSubmatch(line); m != nil {
				child, _ := strconv.Atoi(m[1])
				parent, _ := strconv.Atoi(m[2])
				forks[parent] = append(forks[parent], child)
				continue
			}
			if strings.Contains(line, "PERF_RECORD_") {
				continue
			}
			cur = &sample{pid: headerPID(line)}
		case cur != nil:
			if f := frameName(line); f != "" {
				cur.frames = append(cur.frames, f)
			}
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return Profile{}, err
	}
	keep := map[int]bool{}
	var mark func(pid int)
	mark = func(pid int) {
		if keep[pid] {
			return
		}
		keep[pid] = true
		for _, c := range forks[pid] {
			mark(c)
		}
	}
	for _, pid := range roots {
		mark(pid)
	}
	p := Profile{Stacks: map[string]int{}}
	for _, s := range samples {
		if len(roots) > 0 && !keep[s.pid] {
			continue
		}
		// Leaf first in perf's output; root first when folded.
		fr := s.frames
		for i, j := 0, len(fr)-1; i < j; i, j = i+1, j-1 {
			fr[i], fr[j] = fr[j], fr[i]
		}
		p.Stacks[strings.Join(fr, ";")]++
		p.Samples++
	}
	return p, nil
}

// forkLine is perf script's task event "PERF_RECORD_FORK(child:tid):(parent:tid)".
var forkLine = regexp.MustCompile(`PERF_RECORD_FORK\((\d+):\d+\):\((\d+):\d+\)`)

// headerPID finds "pid/tid" in a sample's header line ("postgres 4242/4242").
func headerPID(line string) int {
	f := strings.Fields(line)
	for i := len(f) - 1; i >= 0; i-- {
		if pid, _, ok := strings.Cut(f[i], "/"); ok {
			if n, err := strconv.Atoi(pid); err == nil {
				return n
			}
		}
	}
	return 0
}

// frameName turns "\t  7f3a12 hash_bytes+0x1c (/usr/lib/postgresql/15/bin/postgres)"
// into "hash_bytes".
func frameName(line string) string {
	f := strings.TrimSpace(line)
	_, rest, ok := strings.Cut(f, " ") // the address
	if !ok {
		return ""
	}
	sym, dso := rest, ""
	if i := strings.LastIndex(rest, " ("); i >= 0 && strings.HasSuffix(rest, ")") {
		sym, dso = rest[:i], rest[i+2:len(rest)-1]
	}
	if i := strings.LastIndex(sym, "+0x"); i > 0 {
		sym = sym[:i]
	}
	sym = strings.TrimSpace(sym)
	if sym != "" && sym != "[unknown]" {
		return strings.ReplaceAll(sym, ";", ":")
	}
	if dso != "" && dso != "[unknown]" {
		return "[" + filepath.Base(dso) + "]"
	}
	return ""
}

// Shares gives every function's self and inclusive share of p.
func (p Profile) Shares() map[string]Share {
	out := map[string]Share{}
	if p.Samples == 0 {
		return out
	}
	n := float64(p.Samples)
	for stack, c := range p.Stacks {
		frames := strings.Split(stack, ";")
		seen := map[string]bool{}
		for _, f := range frames {
			if seen[f] {
				continue
			}
			seen[f] = true
			s := out[f]
			s.Inclusive += float64(c) / n
			out[f] = s
		}
		leaf := frames[len(frames)-1]
		s := out[leaf]
		s.Self += float64(c) / n
		out[leaf] = s
	}
	return out
}

// Merge adds profiles together, for a flame graph of several runs.
func Merge(ps []Profile) Profile {
	m := Profile{Stacks: map[string]int{}}
	for _, p := range ps {
		for s, c := range p.Stacks {
			m.Stacks[s] += c
		}
		m.Samples += p.Samples
	}
	return m
}

// Folded writes p in the folded format of Brendan Gregg's flamegraph.pl
// ("a;b;c 12" per line), sorted.
func (p Profile) Folded(w io.Writer) error {
	keys := make([]string, 0, len(p.Stacks))
	for k := range p.Stacks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bw := bufio.NewWriter(w)
	for _, k := range keys {
		if _, err := bw.WriteString(k + " " + strconv.Itoa(p.Stacks[k]) + "\n"); err != nil {
			return err
		}
	}
	return bw.Flush()
}
