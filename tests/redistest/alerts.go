package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"

	alerts "github.com/middleware-operator/middleware-operator/config/prometheus"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// AlertSelects evaluates the expression of alert (config/prometheus/alerts.yaml) with
// promtool over the series of families that carry namespace ns, held as they are for a few
// minutes, and fails the test unless the expression selects some series exactly when want
// is true. families are what the operator's metrics endpoint serves (its registry gathered),
// so this is the alert's condition over what Prometheus would scrape at that moment; the
// alert's `for` is left to the rule unit tests.
func AlertSelects(t *testing.T, families []*dto.MetricFamily, ns, alert string, want bool) {
	t.Helper()
	expr := alertExpr(t, alert)
	var series []map[string]string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := []string{}
			inNamespace := false
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				inNamespace = inNamespace || (l.GetName() == "namespace" && l.GetValue() == ns)
			}
			if !inNamespace {
				continue
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			series = append(series, map[string]string{
				"series": f.GetName() + "{" + strings.Join(labels, ",") + "}",
				"values": fmt.Sprintf("%g+0x5", v),
			})
		}
	}
	if len(series) == 0 {
		t.Fatalf("no series of namespace %s to evaluate %s over", ns, alert)
	}
	check := map[string]any{"expr": "count(" + expr + ")", "eval_time": "4m", "exp_samples": []any{}}
	if want {
		check["exp_samples"] = []any{map[string]any{"labels": "{}", "value": 1}}
	}
	file, err := yaml.Marshal(map[string]any{
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": series, "promql_expr_test": []any{check}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "alert-"+alert+".yaml")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(testenv.Tool(t, "promtool"), "test", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("%s (%s) over the %d scraped series of %s: want selecting %v: %v\n%s", alert, expr, len(series), ns, want, err, out)
	}
}

// alertExpr is the expression of the named alert of config/prometheus/alerts.yaml.
func alertExpr(t *testing.T, alert string) string {
	t.Helper()
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(alerts.Alerts, &file); err != nil {
		t.Fatal(err)
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == alert {
				return strings.TrimSpace(r.Expr)
			}
		}
	}
	t.Fatalf("no alert %s in config/prometheus/alerts.yaml", alert)
	return ""
}
