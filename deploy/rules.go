package deploy

import (
	_ "embed"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// AlertsFile is where the alert rules live, relative to this folder.
const AlertsFile = "prometheus/alerts.yml"

//go:embed prometheus/alerts.yml
var alertsYAML []byte

// AlertsYAML returns prometheus/alerts.yml as it was when the importing
// binary was built (a copy: the caller may keep or change it).
func AlertsYAML() []byte { return append([]byte(nil), alertsYAML...) }

// Rule is one rule of prometheus/alerts.yml: an alert (Alert set) or a
// recording rule (Record set).
type Rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	Annotations map[string]string `yaml:"annotations"`
}

// Name is the alert's name, or the recording rule's.
func (r Rule) Name() string { return r.Alert + r.Record }

// Rules returns every rule of prometheus/alerts.yml, group by group.
func Rules() ([]Rule, error) {
	var f struct {
		Groups []struct {
			Rules []Rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(alertsYAML, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", AlertsFile, err)
	}
	var out []Rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}
