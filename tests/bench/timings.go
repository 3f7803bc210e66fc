package bench

import (
	"fmt"
	"strings"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// timing names a histogram of the in-process operator's metrics registry and the label
// value its series must carry: where a wave's time went, on average.
type timing struct{ what, metric, label, value string }

// waveTimings are the waits an AppService's change goes through in the operator: its turn
// in the work queue and the reconcile (which includes its API requests).
var waveTimings = []timing{
	{"queue wait", "workqueue_queue_duration_seconds", "name", "appservice"},
	{"reconcile", "workqueue_work_duration_seconds", "name", "appservice"},
}

// timings reads waveTimings' sums and counts between two Resets.
type timings struct{ sum, count map[string]float64 }

// Reset returns the mean of each timing since the last Reset, as one line.
func (t *timings) Reset() string {
	sum, count := map[string]float64{}, map[string]float64{}
	families, _ := ctrlmetrics.Registry.Gather()
	for _, mf := range families {
		for _, tm := range waveTimings {
			if mf.GetName() != tm.metric {
				continue
			}
			for _, m := range mf.GetMetric() {
				if hasLabel(m, tm.label, tm.value) {
					sum[tm.what] += m.GetHistogram().GetSampleSum()
					count[tm.what] += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	var parts []string
	for _, tm := range waveTimings {
		n := count[tm.what] - t.count[tm.what]
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f x %.1f ms", tm.what, n, 1000*(sum[tm.what]-t.sum[tm.what])/n))
		}
	}
	t.sum, t.count = sum, count
	return strings.Join(parts, ", ")
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
