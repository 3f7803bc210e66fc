package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// collectors is everything the operator registers.
func collectors() []prometheus.Collector {
	out := append([]prometheus.Collector{&ResourceCollector{}}, operatorCounters...)
	for _, v := range redisVecs {
		out = append(out, v)
	}
	return out
}

func TestDocsMatchTheRegisteredMetrics(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != Markdown() {
		t.Error("docs/metrics.md is stale: run go run ./hack/metricsdoc > docs/metrics.md")
	}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	var described []string
	for _, c := range collectors() {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			described = append(described, fqName.FindStringSubmatch(d.String())[1])
		}
	}
	var documented []string
	for _, s := range Specs() {
		documented = append(documented, s.Name)
		if !strings.HasPrefix(s.Name, "middleware_operator_") {
			t.Errorf("%s lacks the middleware_operator_ prefix", s.Name)
		}
		if slices.ContainsFunc(s.Labels, func(l string) bool { return l == "pod" || l == "ip" || l == "node_id" || l == "key" }) {
			t.Errorf("%s has an unbounded label: %v", s.Name, s.Labels)
		}
	}
	slices.Sort(described)
	slices.Sort(documented)
	if !slices.Equal(described, documented) {
		t.Errorf("registered %v\ndocumented %v", described, documented)
	}
}

// TestMetricsPassTheLinter runs the checks `promtool check metrics` runs (the same promlint).
func TestMetricsPassTheLinter(t *testing.T) {
	RedisStateOK.WithLabelValues("ns", "lint").Set(1)
	RedisRecoveries.WithLabelValues("ns", "lint", "GhostForgotten").Inc()
	defer ForgetRedisCluster("ns", "lint")
	StatusWrites.WithLabelValues("AppService", "lint").Inc()
	defer StatusWrites.DeleteLabelValues("AppService", "lint")
	for _, c := range append(collectors()[1:], &ResourceCollector{Reader: fakeReader(t)}) {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func fakeReader(t *testing.T) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := appsv1api.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := redisv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	available := []metav1.Condition{{Type: "Available", Status: metav1.ConditionTrue, Reason: "Ready"}}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "a"}, Spec: appsv1api.AppServiceSpec{Size: ptr.To[int32](3)},
			Status: appsv1api.AppServiceStatus{ReadyReplicas: 2, Conditions: available}},
		&appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "a"}},
		&appsv1api.CloudManager{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "b"},
			Status: appsv1api.CloudManagerStatus{Phase: "Deploying", Front: "1/1", Identity: "0/2"}},
		&redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "c"},
			Status: redisv1alpha1.RedisClusterStatus{Phase: redisv1alpha1.PhaseRunning, Conditions: available}},
	).Build()
}

func TestResourceCollectorReportsWhatTheCacheHolds(t *testing.T) {
	want := `
# HELP middleware_operator_appservice_replicas_desired Pods an AppService asks for (spec.size).
# TYPE middleware_operator_appservice_replicas_desired gauge
middleware_operator_appservice_replicas_desired{name="api",namespace="a"} 1
middleware_operator_appservice_replicas_desired{name="web",namespace="a"} 3
# HELP middleware_operator_appservice_replicas_ready Ready pods of an AppService's Deployment.
# TYPE middleware_operator_appservice_replicas_ready gauge
middleware_operator_appservice_replicas_ready{name="api",namespace="a"} 0
middleware_operator_appservice_replicas_ready{name="web",namespace="a"} 2
# HELP middleware_operator_cloudmanager_replicas_desired Pods a CloudManager tier asks for.
# TYPE middleware_operator_cloudmanager_replicas_desired gauge
middleware_operator_cloudmanager_replicas_desired{name="cm",namespace="b",tier="front"} 1
middleware_operator_cloudmanager_replicas_desired{name="cm",namespace="b",tier="identity"} 2
# HELP middleware_operator_cloudmanager_replicas_ready Available pods of a CloudManager tier.
# TYPE middleware_operator_cloudmanager_replicas_ready gauge
middleware_operator_cloudmanager_replicas_ready{name="cm",namespace="b",tier="front"} 1
middleware_operator_cloudmanager_replicas_ready{name="cm",namespace="b",tier="identity"} 0
# HELP middleware_operator_resource_conditions Custom resources by kind, condition type and condition status.
# TYPE middleware_operator_resource_conditions gauge
middleware_operator_resource_conditions{condition="Available",kind="AppService",status="True"} 1
middleware_operator_resource_conditions{condition="Available",kind="RedisCluster",status="True"} 1
# HELP middleware_operator_resources Custom resources by kind and phase (an AppService's phase is Available or NotAvailable, from its Available condition).
# TYPE middleware_operator_resources gauge
middleware_operator_resources{kind="AppService",phase="Available"} 1
middleware_operator_resources{kind="AppService",phase="NotAvailable"} 1
middleware_operator_resources{kind="CloudManager",phase="Deploying"} 1
middleware_operator_resources{kind="RedisCluster",phase="Running"} 1
`
	if err := testutil.CollectAndCompare(&ResourceCollector{Reader: fakeReader(t)}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestForgetRedisClusterDropsOnlyItsSeries(t *testing.T) {
	for _, name := range []string{"gone", "kept"} {
		RedisSlotsOK.WithLabelValues("ns", name).Set(16384)
		RedisFailovers.WithLabelValues("ns", name, "forced").Inc()
	}
	defer ForgetRedisCluster("ns", "kept")
	ForgetRedisCluster("ns", "gone")
	if n := testutil.CollectAndCount(RedisSlotsOK); n != 1 {
		t.Errorf("%d slots_ok series, want the kept cluster's only", n)
	}
	if n := testutil.CollectAndCount(RedisFailovers); n != 1 {
		t.Errorf("%d failovers series, want the kept cluster's only", n)
	}
}
