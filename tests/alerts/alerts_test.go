// Package alerts checks the operator's alerting rules (config/prometheus/alerts.yaml): promtool
// accepts them and their unit tests pass (every alert fires on synthetic series and stays
// silent on healthy ones), each names only metrics the operator or Prometheus serves, and each
// has a severity, a summary, a description and a runbook that exists. It checks the Grafana
// dashboard (config/grafana) the same way: every query parses and names served metrics.
package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func rules(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// promtool is the binary `make tools` builds.
func promtool(t *testing.T) string { return testenv.Tool(t, "promtool") }

func TestPromtoolChecksAndTestsTheRules(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "config", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool(t), args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertIsTested: each alert of the rule file is evaluated by the promtool unit
// tests, both firing and silent.
func TestEveryAlertIsTested(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, r := range rules(t) {
		if !fires[r.Alert] {
			t.Errorf("no promtool test makes %s fire", r.Alert)
		}
		if !silent[r.Alert] {
			t.Errorf("no promtool test shows %s silent", r.Alert)
		}
	}
}

// metricName matches the metric names an expression uses.
var metricName = regexp.MustCompile(`\b(middleware_operator_[a-z_]+|controller_runtime_[a-z_]+|up)\b`)

func TestAlertsAreComplete(t *testing.T) {
	served := map[string]bool{"up": true, "controller_runtime_reconcile_errors_total": true}
	for _, s := range metrics.Specs() {
		served[s.Name] = true
	}
	want := []string{"RedisClusterDown", "RedisClusterSlotsNotCovered", "RedisClusterMasterWithoutReplica",
		"RedisClusterMigrationStuck", "RedisClusterNodeFailed", "RedisClusterBackupTooOld", "RedisClusterBackupFailing",
		"RedisClusterMemoryHigh", "RedisClusterWritesRefused", "RedisClusterNodeOOMKilled", "RedisClusterVolumeNearlyFull",
		"AppServiceReplicasMismatch", "CloudManagerNotReady",
		"OperatorReconcileErrorsHigh", "OperatorAbsent", "RedisClusterArchiveStopped", "RedisClusterArchiveLagging", "RedisClusterArchiveGap"}
	var got []string
	for _, r := range rules(t) {
		got = append(got, r.Alert)
		for _, m := range metricName.FindAllString(r.Expr, -1) {
			if !served[m] {
				t.Errorf("%s uses %s, which nothing serves", r.Alert, m)
			}
		}
		if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
			t.Errorf("%s has severity %q, want critical or warning", r.Alert, sev)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s has no %s", r.Alert, a)
			}
		}
		book := "docs/runbooks/" + r.Alert + ".md"
		if !strings.HasSuffix(r.Annotations["runbook_url"], "/blob/main/"+book) {
			t.Errorf("%s links %s, want its runbook %s", r.Alert, r.Annotations["runbook_url"], book)
		}
		if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), book)); err != nil {
			t.Errorf("%s: %v", r.Alert, err)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("alerts %v, want %v", got, want)
	}
}
