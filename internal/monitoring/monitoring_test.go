package monitoring

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	alerts "github.com/middleware-operator/middleware-operator/config/prometheus"
)

// TestServiceMonitorSelectsTheMetricsService: the ServiceMonitor's selector and port are the
// metrics Service's labels and port name as config/default ships them.
func TestServiceMonitorSelectsTheMetricsService(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "default", "metrics_service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := yaml.Unmarshal(data, svc); err != nil {
		t.Fatal(err)
	}
	sm := ServiceMonitor("ops")
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !reflect.DeepEqual(selector, svc.Labels) {
		t.Errorf("the ServiceMonitor selects %v, the metrics Service is labelled %v", selector, svc.Labels)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name {
		t.Errorf("the ServiceMonitor scrapes %v, the metrics Service's port is %q", endpoints, svc.Spec.Ports[0].Name)
	}
	if sm.GetNamespace() != "ops" {
		t.Errorf("namespace %q, want ops", sm.GetNamespace())
	}
}

// TestPrometheusRuleHoldsTheAlerts: every group and alert of config/prometheus/alerts.yaml is
// in the PrometheusRule; a rule file without groups is an error.
func TestPrometheusRuleHoldsTheAlerts(t *testing.T) {
	rule, err := PrometheusRule("ops", alerts.Alerts)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(alerts.Alerts, &file); err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if !reflect.DeepEqual(groups, file.Groups) || len(groups) == 0 {
		t.Errorf("the PrometheusRule has %d groups, the rule file %d (or they differ)", len(groups), len(file.Groups))
	}
	if _, err := PrometheusRule("ops", []byte("groups: []\n")); err == nil {
		t.Error("a rule file without groups gave a PrometheusRule")
	}
}

// TestKeeperWaitsForTheAPI: while the cluster does not serve monitoring.coreos.com/v1 the
// keeper writes nothing; once it does, one Sync creates both objects.
func TestKeeperWaitsForTheAPI(t *testing.T) {
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	writes := 0
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptorCountingApplies(&writes)).Build()
	k := &Keeper{Client: c, Discovery: disc, Namespace: "ops", Rules: alerts.Alerts, Log: logr.Discard()}
	if err := k.Sync(context.Background()); err != nil || writes != 0 {
		t.Fatalf("without the API: Sync = %v after %d writes, want nil after 0", err, writes)
	}
	disc.Resources = []*metav1.APIResourceList{{
		GroupVersion: GroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "servicemonitors", Kind: "ServiceMonitor"}, {Name: "prometheusrules", Kind: "PrometheusRule"}},
	}}
	if err := k.Sync(context.Background()); err != nil || writes != 2 {
		t.Fatalf("with the API: Sync = %v after %d writes, want nil after 2", err, writes)
	}
}

// interceptorCountingApplies counts the apply requests the keeper sends
// (the fake client's own apply needs the kinds' schemas, which it has not).
func interceptorCountingApplies(n *int) interceptor.Funcs {
	return interceptor.Funcs{Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
		*n++
		return nil
	}}
}
