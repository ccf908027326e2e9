package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
)

// OSSettings are the operating-system settings that change what a
// PostgreSQL benchmark measures, as they were during a sample. What the
// machine does not have (a VM has no cpufreq and often no SMT control; a
// data directory on tmpfs or overlay has no block device) is absent, not
// an error and not "unknown".
type OSSettings struct {
	// Device is the block device holding the data directory ("vda",
	// "nvme0n1"); the queue settings below are that device's.
	Device string `json:"device,omitempty"`
	// ReadaheadKB is the device's read_ahead_kb.
	ReadaheadKB *int `json:"readahead_kb,omitempty"`
	// Scheduler is the device's selected I/O scheduler ("mq-deadline",
	// "none").
	Scheduler string `json:"scheduler,omitempty"`
	// Rotational is true for spinning disks.
	Rotational *bool `json:"rotational,omitempty"`
	// VM holds the vm.dirty_* sysctls (dirty_ratio, dirty_bytes, ...).
	VM map[string]int64 `json:"vm,omitempty"`
	// SMT is the kernel's SMT control ("on", "off", "forceoff").
	SMT string `json:"smt,omitempty"`
	// Boost is "on" or "off": cpufreq boost or intel_pstate's turbo.
	Boost string `json:"boost,omitempty"`
	// Governor is cpu0's frequency governor.
	Governor string `json:"governor,omitempty"`
}

// OSSpec is a scenario's os: section: settings pgbisect sets for each
// sample and puts back afterwards. It needs root. Default: none, the
// machine's settings are only recorded.
type OSSpec struct {
	// ReadaheadKB sets the read_ahead_kb of the data directory's device.
	ReadaheadKB *int `yaml:"readahead_kb"`
	// Scheduler selects the I/O scheduler of the data directory's device
	// (one the kernel offers in queue/scheduler).
	Scheduler string `yaml:"scheduler"`
	// VM sets vm.dirty_* sysctls (dirty_ratio, dirty_background_ratio,
	// dirty_bytes, dirty_background_bytes, dirty_expire_centisecs,
	// dirty_writeback_centisecs).
	VM map[string]int64 `yaml:"vm"`
}

// vmKeys are the vm sysctls an os: section may set and a sample records.
var vmKeys = []string{"dirty_ratio", "dirty_background_ratio", "dirty_bytes", "dirty_background_bytes",
	"dirty_expire_centisecs", "dirty_writeback_centisecs"}

// Empty reports whether the spec sets nothing.
func (o OSSpec) Empty() bool {
	return o.ReadaheadKB == nil && o.Scheduler == "" && len(o.VM) == 0
}

func (o OSSpec) validate() error {
	if o.ReadaheadKB != nil && *o.ReadaheadKB < 0 {
		return errAt("$.os.readahead_kb", "readahead_kb %d: use 0 (no readahead) or a size in kB such as 128", *o.ReadaheadKB)
	}
	if o.Scheduler != "" && strings.ContainsAny(o.Scheduler, "/ \t\n[]") {
		return errAt("$.os.scheduler", "scheduler %q is not a scheduler name: use one the device offers, such as none or mq-deadline", o.Scheduler)
	}
	for _, k := range sortedKeys(o.VM) {
		if !slices.Contains(vmKeys, k) {
			hint := ""
			if c := strictyaml.Closest(k, vmKeys); c != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", c)
			}
			return errAt("$.os.vm."+k, "vm.%s cannot be set by a scenario%s: use one of %s", k, hint, strings.Join(vmKeys, ", "))
		}
		if o.VM[k] < 0 {
			return errAt("$.os.vm."+k, "vm.%s = %d: the kernel takes 0 or more", k, o.VM[k])
		}
	}
	return nil
}

// sysfs reads and writes kernel settings under a root ("/" on a machine,
// a directory shaped like one in tests).
type sysfs struct {
	root string
	// device finds the block device directory (under root, in
	// /sys/devices) of the file system holding path, or "" when it has
	// none.
	device func(path string) string
}

var hostSys = sysfs{root: "/", device: blockDevice}

func (s sysfs) path(p string) string { return filepath.Join(s.root, p) }

// read returns the trimmed first line of a kernel file and whether it
// exists.
func (s sysfs) read(p string) (string, bool) {
	b, err := os.ReadFile(s.path(p))
	if err != nil {
		return "", false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), true
}

// readOS records the OS settings that apply to a data directory.
func (s sysfs) readOS(dataDir string) OSSettings {
	var o OSSettings
	if dev := s.device(dataDir); dev != "" {
		o.Device = filepath.Base(dev)
		if v, ok := s.read(filepath.Join(dev, "queue/read_ahead_kb")); ok {
			if n, err := strconv.Atoi(v); err == nil {
				o.ReadaheadKB = &n
			}
		}
		if v, ok := s.read(filepath.Join(dev, "queue/scheduler")); ok {
			o.Scheduler = bracketed(v)
		}
		if v, ok := s.read(filepath.Join(dev, "queue/rotational")); ok {
			r := v == "1"
			o.Rotational = &r
		}
	}
	for _, k := range vmKeys {
		if v, ok := s.read("proc/sys/vm/" + k); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				if o.VM == nil {
					o.VM = map[string]int64{}
				}
				o.VM[k] = n
			}
		}
	}
	if v, ok := s.read("sys/devices/system/cpu/smt/control"); ok && v != "notsupported" && v != "notimplemented" {
		o.SMT = v
	}
	if v, ok := s.read("sys/devices/system/cpu/cpufreq/boost"); ok {
		o.Boost = onOff(v == "1")
	} else if v, ok := s.read("sys/devices/system/cpu/intel_pstate/no_turbo"); ok {
		o.Boost = onOff(v == "0")
	}
	if v, ok := s.read("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"); ok {
		o.Governor = v
	}
	return o
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// osChange is one kernel file pgbisect wrote and the value it had before.
type osChange struct {
	File string `json:"file"`
	Old  string `json:"old"`
}

// applyOS sets spec for the file system holding dir and returns the
// changes made, oldest first. Before it writes anything it records the old
// values in restoreFile, so that a pgbisect killed mid-sample puts them
// back on its next run (restoreOS). On error nothing stays changed.
func (s sysfs) applyOS(dir string, spec OSSpec, restoreFile string) ([]osChange, error) {
	if spec.Empty() {
		return nil, nil
	}
	writes, err := s.planOS(dir, spec)
	if err != nil {
		return nil, err
	}
	var changes []osChange
	record := func(f string) {
		for _, c := range changes {
			if c.File == f {
				return
			}
		}
		old, _ := s.read(f)
		if strings.HasSuffix(f, "/scheduler") {
			old = bracketed(old)
		}
		changes = append(changes, osChange{File: f, Old: old})
	}
	for _, w := range writes {
		record(w.File)
		// Setting dirty_bytes zeroes dirty_ratio and the other way round,
		// and 0 cannot be written back: the pair is restored by writing
		// whichever of the two was set before.
		if other := dirtyCounterpart(w.File); other != "" {
			record(other)
		}
	}
	b, err := json.Marshal(changes)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(restoreFile, b, 0o600); err != nil {
		return nil, fmt.Errorf("recording the OS settings to put back: %w", err)
	}
	for _, w := range writes {
		if err := os.WriteFile(s.path(w.File), []byte(w.Old+"\n"), 0); err != nil {
			_ = s.undo(changes)
			_ = os.Remove(restoreFile)
			return nil, fmt.Errorf("setting %s to %s for the scenario's os: section: %w", w.File, w.Old, err)
		}
	}
	return changes, nil
}

// planOS resolves spec to the kernel files to write (osChange.Old holds
// the new value here) and checks that each can be written, so that a
// scenario the machine cannot honour fails before anything is measured.
func (s sysfs) planOS(dir string, spec OSSpec) ([]osChange, error) {
	if !proc.IsRoot() && s.root == "/" {
		return nil, errors.New("the scenario's os: section sets kernel settings, which needs root: run pgbisect as root or remove the os: section")
	}
	var writes []osChange
	if spec.ReadaheadKB != nil || spec.Scheduler != "" {
		dev := s.device(dir)
		if dev == "" {
			return nil, fmt.Errorf("the scenario's os: section sets readahead_kb or scheduler, but %s is on no block device (tmpfs, overlay): put the state directory on a disk", dir)
		}
		if spec.ReadaheadKB != nil {
			f := filepath.Join(dev, "queue/read_ahead_kb")
			if _, ok := s.read(f); !ok {
				return nil, fmt.Errorf("device %s has no read_ahead_kb setting: remove os.readahead_kb", filepath.Base(dev))
			}
			writes = append(writes, osChange{File: f, Old: strconv.Itoa(*spec.ReadaheadKB)})
		}
		if spec.Scheduler != "" {
			f := filepath.Join(dev, "queue/scheduler")
			v, ok := s.read(f)
			if !ok {
				return nil, fmt.Errorf("device %s has no I/O scheduler setting: remove os.scheduler", filepath.Base(dev))
			}
			offered := strings.Fields(strings.NewReplacer("[", "", "]", "").Replace(v))
			if !slices.Contains(offered, spec.Scheduler) {
				return nil, fmt.Errorf("os.scheduler %q: device %s offers %s", spec.Scheduler, filepath.Base(dev), strings.Join(offered, ", "))
			}
			writes = append(writes, osChange{File: f, Old: spec.Scheduler})
		}
	}
	for _, k := range sortedKeys(spec.VM) {
		f := "proc/sys/vm/" + k
		if _, ok := s.read(f); !ok {
			return nil, fmt.Errorf("this kernel has no vm.%s: remove it from the os: section", k)
		}
		writes = append(writes, osChange{File: f, Old: strconv.FormatInt(spec.VM[k], 10)})
	}
	return writes, nil
}

// undo puts back changes, newest first. Of a dirty_*_bytes and
// dirty_*_ratio pair only the one that was set (non-zero) is written: the
// kernel zeroes the other.
func (s sysfs) undo(changes []osChange) error {
	var errs []error
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		if c.Old == "0" && strings.Contains(c.File, "vm/dirty_") && (strings.HasSuffix(c.File, "_bytes") || strings.HasSuffix(c.File, "_ratio")) {
			// Writing its counterpart back zeroes it; 0 itself is refused.
			continue
		}
		if err := os.WriteFile(s.path(c.File), []byte(c.Old+"\n"), 0); err != nil {
			errs = append(errs, fmt.Errorf("putting back %s = %s: %w", c.File, c.Old, err))
		}
	}
	return errors.Join(errs...)
}

// dirtyCounterpart is the other half of a vm.dirty_* bytes/ratio pair, or
// "" for any other file.
func dirtyCounterpart(f string) string {
	dir, base := filepath.Dir(f), filepath.Base(f)
	if filepath.Base(dir) != "vm" {
		return ""
	}
	switch {
	case strings.HasSuffix(base, "_bytes"):
		return filepath.Join(dir, strings.TrimSuffix(base, "_bytes")+"_ratio")
	case strings.HasSuffix(base, "_ratio"):
		return filepath.Join(dir, strings.TrimSuffix(base, "_ratio")+"_bytes")
	}
	return ""
}

// restoreOS puts back what an interrupted applyOS left changed, as
// recorded in restoreFile, and removes the file. No file, nothing to do.
func (s sysfs) restoreOS(restoreFile string) error {
	b, err := os.ReadFile(restoreFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var changes []osChange
	if err := json.Unmarshal(b, &changes); err != nil {
		return fmt.Errorf("%s is not a record of OS settings (%v): put them back by hand and remove it", restoreFile, err)
	}
	if err := s.undo(changes); err != nil {
		return err
	}
	return os.Remove(restoreFile)
}

// blockDevice returns the /sys/devices directory of the whole disk holding
// path ("/sys/devices/pci.../block/vda"), or "" when the file system is on
// no block device.
func blockDevice(path string) string {
	var st syscall.Stat_t
	for p := path; ; p = filepath.Dir(p) {
		if err := syscall.Stat(p, &st); err == nil {
			break
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	if major == 0 {
		return ""
	}
	d, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(d, "partition")); err == nil {
		d = filepath.Dir(d)
	}
	return d
}
