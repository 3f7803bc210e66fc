// Package prometheus holds the operator's alerting rules (alerts.yaml, a Prometheus rule
// file) so the operator binary can put them in the PrometheusRule it keeps at run time.
package prometheus

import _ "embed"

// Alerts is alerts.yaml.
//
//go:embed alerts.yaml
var Alerts []byte
