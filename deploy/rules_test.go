package deploy_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/deploy"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const (
	alertsTestFile = "prometheus/alerts_test.yml"
	runbookFile    = "README.md"
	runbookBase    = "https://github.com/flatline-dev/flatline/blob/main/deploy/README.md#"
)

// promtoolBinary finds promtool (Debian package prometheus): in CI its
// absence fails the test (.ci/run installs it), elsewhere it skips.
func promtoolBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if testenv.InCI() {
		t.Fatal("promtool not found: CI must check the alert rules (apt-get install prometheus)")
	}
	t.Skip("promtool not found (apt-get install prometheus); skipping the rule checks")
	return ""
}

// The alert rules load, and every alert fires on a series showing its
// fault and stays quiet on a healthy one: promtool's unit tests.
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	bin := promtoolBinary(t)
	for _, args := range [][]string{
		{"check", "rules", deploy.AlertsFile},
		{"test", "rules", alertsTestFile},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alerts returns the alerting rules of alerts.yml (not the recording ones).
func alerts(t *testing.T) []deploy.Rule {
	t.Helper()
	rules, err := deploy.Rules()
	if err != nil {
		t.Fatal(err)
	}
	var out []deploy.Rule
	for _, r := range rules {
		if r.Alert != "" {
			out = append(out, r)
		}
	}
	return out
}

// Every alert links its runbook: an entry of its own in deploy/README.md
// (a heading named as the alert, which GitHub anchors as its lower-case
// name) saying what it means, what to check and what to do; and every
// alert has a unit test in alerts_test.yml.
func TestEveryAlertHasARunbookEntryAndATest(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(alertsTestFile)
	if err != nil {
		t.Fatal(err)
	}
	rules := alerts(t)
	if len(rules) < 8 {
		t.Fatalf("%s has %d alerts; parsing is broken", deploy.AlertsFile, len(rules))
	}
	for _, r := range rules {
		if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		entry := regexp.MustCompile(`(?ms)^#### ` + regexp.QuoteMeta(r.Alert) + `\n(.*?)(\n#{1,4} |\z)`).FindSubmatch(readme)
		if entry == nil {
			t.Errorf("%s: no runbook entry (a heading \"#### %s\") in deploy/%s", r.Alert, r.Alert, runbookFile)
			continue
		}
		for _, part := range []string{"Means:", "Check:", "Do:"} {
			if !strings.Contains(string(entry[1]), part) {
				t.Errorf("%s: its runbook entry lacks %q", r.Alert, part)
			}
		}
		if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
			t.Errorf("%s: no unit test in %s", r.Alert, alertsTestFile)
		}
	}
}
