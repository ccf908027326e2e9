package web

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// requestView is a queued job's request as the queue and the job page list
// it: the fields a person asked for, never the raw arguments (which may
// hold a scenario's path on the server or a patch's whole text).
type requestView struct {
	// Scenario is the scenario's name (a path's file name without .yaml).
	Scenario string
	// Revisions are what is measured: "good..bad" of a bisection, "a vs
	// b" of a comparison (with its patches).
	Revisions string
	Metric    string
	Point     string
	// Requester is who asked (user@host, a GitHub login), when recorded.
	Requester string
}

// requestOf reads the request out of a job's arguments ({"request": ...},
// as internal/front/jobs stores them). Unknown or missing fields are left empty:
// the view is for people, and a job of an older or newer pgbisect still
// lists.
func requestOf(args json.RawMessage) requestView {
	var a struct {
		Request struct {
			Scenario  string   `json:"scenario"`
			Good      string   `json:"good"`
			Bad       string   `json:"bad"`
			Resume    string   `json:"resume"`
			A         string   `json:"a"`
			B         string   `json:"b"`
			Metric    string   `json:"metric"`
			Point     string   `json:"point"`
			Requester string   `json:"requester"`
			Patches   []string `json:"patches"`
			PatchData []struct {
				Name string `json:"name"`
			} `json:"patch_data"`
		} `json:"request"`
	}
	json.Unmarshal(args, &a) //nolint:errcheck // an unknown shape lists its kind only
	r := a.Request
	v := requestView{Scenario: scenarioName(r.Scenario), Metric: r.Metric, Point: r.Point, Requester: r.Requester}
	switch {
	case r.Resume != "":
		v.Revisions = "resume " + r.Resume
	case r.Good != "" || r.Bad != "":
		v.Revisions = r.Good + ".." + r.Bad
	case r.A != "":
		v.Revisions = r.A
		if r.B != "" {
			v.Revisions += " vs " + r.B
		}
		var names []string
		for _, p := range r.Patches {
			names = append(names, path.Base(p))
		}
		for _, p := range r.PatchData {
			names = append(names, path.Base(p.Name))
		}
		if len(names) > 0 {
			v.Revisions += " + " + strings.Join(names, ", ")
		}
	}
	return v
}

// scenarioName is the name of a scenario given by name or by path.
func scenarioName(s string) string {
	if s == "" {
		return ""
	}
	base := path.Base(strings.ReplaceAll(s, "\\", "/"))
	for _, ext := range []string{".yaml", ".yml"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}

// argsJSON is a job's arguments indented for the job page, the text of
// carried patches replaced by their size.
func argsJSON(args json.RawMessage) string {
	var v map[string]any
	if json.Unmarshal(args, &v) != nil {
		return string(args)
	}
	if req, ok := v["request"].(map[string]any); ok {
		if pd, ok := req["patch_data"].([]any); ok {
			for _, p := range pd {
				if m, ok := p.(map[string]any); ok {
					if s, ok := m["data"].(string); ok {
						m["data"] = fmt.Sprintf("(%d bytes of base64)", len(s))
					}
				}
			}
		}
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return string(args)
	}
	return string(out)
}
