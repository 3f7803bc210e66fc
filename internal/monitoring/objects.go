// Package monitoring keeps the operator's own Prometheus Operator objects: a ServiceMonitor
// that scrapes its metrics Service and a PrometheusRule with its alerts. They are not in the
// OLM bundle: an InstallPlan holding a kind the cluster does not know fails as a whole
// (operator-sdk #5410, OLM #1860), so the operator creates them at run time, once the
// monitoring.coreos.com API exists (see Keeper).
package monitoring

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// GroupVersion is the Prometheus Operator's API.
var GroupVersion = schema.GroupVersion{Group: "monitoring.coreos.com", Version: "v1"}

// Names of the objects, in the operator's namespace.
const (
	ServiceMonitorName = "middleware-operator-metrics"
	PrometheusRuleName = "middleware-operator-alerts"
)

// metricsServiceLabels select the operator's metrics Service
// (config/default/metrics_service.yaml).
var metricsServiceLabels = map[string]any{"control-plane": "controller-manager", "app.kubernetes.io/name": "middleware-operator"}

// objectLabels mark the objects as the operator's.
var objectLabels = map[string]any{"app.kubernetes.io/name": "middleware-operator", "app.kubernetes.io/managed-by": "middleware-operator"}

// ServiceMonitor scrapes the operator's metrics Service in namespace over HTTPS with the
// scraping Prometheus's ServiceAccount token (bind it to the metrics-reader ClusterRole).
// The serving certificate is the operator's self-signed one, so it is not verified.
func ServiceMonitor(namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(),
		"kind":       "ServiceMonitor",
		"metadata":   map[string]any{"name": ServiceMonitorName, "namespace": namespace, "labels": objectLabels},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": metricsServiceLabels},
			"endpoints": []any{map[string]any{
				"port": "https", "scheme": "https", "path": "/metrics",
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
				"tlsConfig":       map[string]any{"insecureSkipVerify": true},
			}},
		},
	}}
}

// PrometheusRule holds the groups of the Prometheus rule file rules (config/prometheus
// alerts.yaml) in namespace.
func PrometheusRule(namespace string, rules []byte) (*unstructured.Unstructured, error) {
	var file struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(rules, &file); err != nil {
		return nil, fmt.Errorf("while reading the alerting rules: %w", err)
	}
	if len(file.Groups) == 0 {
		return nil, fmt.Errorf("the alerting rules have no group")
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(),
		"kind":       "PrometheusRule",
		"metadata":   map[string]any{"name": PrometheusRuleName, "namespace": namespace, "labels": objectLabels},
		"spec":       map[string]any{"groups": file.Groups},
	}}, nil
}
