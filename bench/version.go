package bench

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pgbisect/pgbisect/internal/base/pgversion"
)

// VersionsSpec is a scenario's versions section: the server versions it
// can run on, for a scenario that needs what older (or newer) servers do
// not have, so that it is refused up front instead of failing midway.
type VersionsSpec struct {
	// Supported is a version constraint: ">=12", ">=10 <18" (see
	// pgversion.ParseConstraint; "12" means every 12.x).
	Supported string `yaml:"supported"`
	// Why says what the other versions lack ("COPY FROM ... WHERE is new
	// in 12"); the refusal quotes it. Required with Supported.
	Why string `yaml:"why"`
}

// VersionError is a server outside a scenario's versions: like a
// *SettingError, this build's server cannot run the scenario, which
// inside a bisection's range skips the commit and at its ends stops it.
type VersionError struct {
	Version   string // the server's version ("11.22")
	Supported string // the scenario's constraint (">=12")
	Msg       string // the whole message
}

func (e *VersionError) Error() string { return e.Msg }

// validateVersions parses the versions section.
func (s *Scenario) validateVersions() error {
	s.supported = nil
	v := s.Versions
	if v.Supported == "" && v.Why == "" {
		return nil
	}
	if v.Supported == "" {
		return errAt("$.versions", "versions: give supported, the versions the scenario runs on (e.g. supported: \">=12\"), with why")
	}
	c, err := pgversion.ParseConstraint(v.Supported)
	if err != nil {
		return errAt("$.versions.supported", "versions: %v", err)
	}
	if strings.TrimSpace(v.Why) == "" {
		return errAt("$.versions", "versions: say why the scenario needs %s (why: what the other versions lack), for the message that refuses them", v.Supported)
	}
	s.supported = &c
	return nil
}

// SupportsVersion reports whether the scenario runs on servers of version
// v (always, without a versions section).
func (s *Scenario) SupportsVersion(v pgversion.Version) bool {
	return s.supported == nil || s.supported.Allows(v)
}

// checkVersion returns a *VersionError when the scenario does not run on
// servers of version v.
func (s *Scenario) checkVersion(v pgversion.Version) error {
	if s.SupportsVersion(v) {
		return nil
	}
	return &VersionError{Version: v.String(), Supported: s.Versions.Supported,
		Msg: fmt.Sprintf("%s: the scenario runs on PostgreSQL %s, not on %s (%s): measure builds of the versions it supports",
			s.where("$.versions.supported"), s.Versions.Supported, v, strings.TrimSpace(s.Versions.Why))}
}

// versionSpec is one settings_by_version entry as loaded: its constraint,
// its YAML path and its values (templates not executed; nil: unset).
type versionSpec struct {
	constraint pgversion.Constraint
	path       string
	values     map[string]*string
}

// settingName is what a GUC name looks like (custom ones have a dot).
var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$`)

// validateByVersion parses settings_by_version: every key a version
// constraint, every value a mapping of setting names to scalars or null.
func (s *Scenario) validateByVersion() error {
	s.byVer = nil
	for i, item := range s.SettingsByVersion {
		key, ok := item.Key.(string)
		path := fmt.Sprintf("$.settings_by_version.'%v'", item.Key)
		if !ok {
			return errAt("$.settings_by_version", "settings_by_version entry %d: the key must be a quoted version constraint such as \"<10\" or \">=9.6 <13\"", i+1)
		}
		c, err := pgversion.ParseConstraint(key)
		if err != nil {
			return errAt(path, "settings_by_version: %v", err)
		}
		spec := versionSpec{constraint: c, path: path, values: map[string]*string{}}
		if item.Value != nil {
			m, ok := item.Value.(map[string]any)
			if !ok {
				return errAt(path, "settings_by_version %q must map setting names to values (null leaves a setting out), like {checkpoint_segments: 64}", key)
			}
			for k, v := range m {
				if !settingName.MatchString(k) {
					return errAt(path+"."+k, "settings_by_version %q: %q is not a setting name", key, k)
				}
				if v == nil {
					spec.values[k] = nil
					continue
				}
				str, err := scalarString(v)
				if err != nil {
					return errAt(path+"."+k, "setting %q: %v", k, err)
				}
				spec.values[k] = &str
			}
		}
		s.byVer = append(s.byVer, spec)
	}
	return nil
}
