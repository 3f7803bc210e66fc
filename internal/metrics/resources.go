package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	specs = append(specs, Spec{prefix + name, "gauge", help, labels})
	return prometheus.NewDesc(prefix+name, help, labels, nil)
}

var (
	resourcesByPhase = desc("resources",
		"Custom resources by kind and phase (an AppService's phase is Available or NotAvailable, from its Available condition).", "kind", "phase")
	resourcesByCondition = desc("resource_conditions",
		"Custom resources by kind, condition type and condition status.", "kind", "condition", "status")
	appDesired = desc("appservice_replicas_desired", "Pods an AppService asks for (spec.size).", "namespace", "name")
	appReady   = desc("appservice_replicas_ready", "Ready pods of an AppService's Deployment.", "namespace", "name")
	cmDesired  = desc("cloudmanager_replicas_desired", "Pods a CloudManager tier asks for.", "namespace", "name", "tier")
	cmReady    = desc("cloudmanager_replicas_ready", "Available pods of a CloudManager tier.", "namespace", "name", "tier")
)

// ResourceCollector reports, at scrape time from Reader (the manager's cache, so a scrape
// costs no API call), the custom resources by phase and condition and the replicas of
// AppServices and CloudManagers.
type ResourceCollector struct {
	Reader client.Reader
}

// Describe sends the descriptions of every metric Collect reports.
func (c *ResourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{resourcesByPhase, resourcesByCondition, appDesired, appReady, cmDesired, cmReady} {
		ch <- d
	}
}

// Collect lists the custom resources from the cache and reports them.
func (c *ResourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	phases, conditions := map[[2]string]int{}, map[[3]string]int{}
	count := func(kind, phase string, conds []metav1.Condition) {
		phases[[2]string{kind, phase}]++
		for _, cond := range conds {
			conditions[[3]string{kind, cond.Type, string(cond.Status)}]++
		}
	}
	apps := &appsv1api.AppServiceList{}
	if err := c.Reader.List(ctx, apps); err == nil {
		for i := range apps.Items {
			a := &apps.Items[i]
			phase := "NotAvailable"
			if meta.IsStatusConditionTrue(a.Status.Conditions, "Available") {
				phase = "Available"
			}
			count("AppService", phase, a.Status.Conditions)
			size := int32(1)
			if a.Spec.Size != nil {
				size = *a.Spec.Size
			}
			ch <- prometheus.MustNewConstMetric(appDesired, prometheus.GaugeValue, float64(size), a.Namespace, a.Name)
			ch <- prometheus.MustNewConstMetric(appReady, prometheus.GaugeValue, float64(a.Status.ReadyReplicas), a.Namespace, a.Name)
		}
	}
	cms := &appsv1api.CloudManagerList{}
	if err := c.Reader.List(ctx, cms); err == nil {
		for i := range cms.Items {
			cm := &cms.Items[i]
			count("CloudManager", string(cm.Status.Phase), cm.Status.Conditions)
			for tier, ready := range map[string]string{"front": cm.Status.Front, "identity": cm.Status.Identity, "db": cm.Status.DB} {
				var have, want int
				if _, err := fmt.Sscanf(ready, "%d/%d", &have, &want); err != nil {
					continue // the tier does not exist yet
				}
				ch <- prometheus.MustNewConstMetric(cmDesired, prometheus.GaugeValue, float64(want), cm.Namespace, cm.Name, tier)
				ch <- prometheus.MustNewConstMetric(cmReady, prometheus.GaugeValue, float64(have), cm.Namespace, cm.Name, tier)
			}
		}
	}
	rcs := &redisv1alpha1.RedisClusterList{}
	if err := c.Reader.List(ctx, rcs); err == nil {
		for i := range rcs.Items {
			count("RedisCluster", string(rcs.Items[i].Status.Phase), rcs.Items[i].Status.Conditions)
		}
	}
	for k, n := range phases {
		ch <- prometheus.MustNewConstMetric(resourcesByPhase, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for k, n := range conditions {
		ch <- prometheus.MustNewConstMetric(resourcesByCondition, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
}
