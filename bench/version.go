package bench

import (
	"fmt"
	"regexp"

	"github.com/pgbisect/pgbisect/internal/base/pgversion"
)

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
