package metrics

import (
	"fmt"
	"strings"
)

// Markdown renders Specs as the table of docs/metrics.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Metrics\n\n")
	b.WriteString("The operator's own metrics, served with controller-runtime's on the metrics endpoint (`:8443`, HTTPS,\n")
	b.WriteString("TokenReview + SubjectAccessReview: bind the `middleware-operator-metrics-reader` ClusterRole, see\n")
	b.WriteString("[monitoring.md](monitoring.md#scraping)). Generated from\n")
	b.WriteString("`internal/metrics` by `go run ./hack/metricsdoc > docs/metrics.md`; a test fails when this file is stale.\n\n")
	b.WriteString("| Name | Type | Labels | Help |\n| --- | --- | --- | --- |\n")
	for _, s := range Specs() {
		labels := "-"
		if len(s.Labels) > 0 {
			labels = "`" + strings.Join(s.Labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Name, s.Type, labels, strings.ReplaceAll(s.Help, "|", "\\|"))
	}
	return b.String()
}
