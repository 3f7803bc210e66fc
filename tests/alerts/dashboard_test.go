package alerts

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVariables are what Grafana substitutes in a query before Prometheus sees it.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__range", "6h", "$namespace", ".*")

// TestDashboardQueriesParseAndUseServedMetrics: the Grafana dashboard has one row per kind
// and one for the operator; every panel has a query; every query, with Grafana's variables
// substituted, is valid PromQL (promtool checks it as a recording rule) and names only
// metrics the operator serves.
func TestDashboardQueriesParseAndUseServedMetrics(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "grafana", "middleware-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{
		"up": true, "controller_runtime_reconcile_total": true, "controller_runtime_reconcile_errors_total": true,
		"controller_runtime_reconcile_time_seconds_bucket": true,
	}
	for _, s := range metrics.Specs() {
		served[s.Name] = true
	}
	rows := map[string]bool{}
	type recording struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var records []recording
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows[p.Title] = true
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			for _, m := range metricName.FindAllString(target.Expr, -1) {
				if !served[m] {
					t.Errorf("panel %q uses %s, which nothing serves", p.Title, m)
				}
			}
			records = append(records, recording{Record: fmt.Sprintf("dashboard:query_%d", len(records)), Expr: grafanaVariables.Replace(target.Expr)})
		}
	}
	for _, row := range []string{"Operator", "RedisCluster", "AppService", "CloudManager"} {
		if !rows[row] {
			t.Errorf("the dashboard has no %s row", row)
		}
	}
	file, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": records}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's %d queries: %v\n%s", len(records), err, out)
	}
	t.Logf("%d panels in %d rows; %d queries parse and name only served metrics", len(d.Panels)-len(rows), len(rows), len(records))
}
