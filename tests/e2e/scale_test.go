package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// scale is the part of an autoscaling/v1 Scale the tests read.
type scale struct {
	Spec struct {
		Replicas int32 `json:"replicas"`
	} `json:"spec"`
	Status struct {
		Replicas int32  `json:"replicas"`
		Selector string `json:"selector"`
	} `json:"status"`
}

// readScale reads a resource's scale subresource as kubectl and a HorizontalPodAutoscaler do.
func readScale(t *testing.T, path string) scale {
	t.Helper()
	var s scale
	out := kubectl(t, "get", "--raw", path)
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("the scale at %s: %v\n%s", path, err, out)
	}
	return s
}

// TestKubectlScaleAppService scales an AppService with kubectl scale, reads the scale back
// (with the pods' selector a HorizontalPodAutoscaler needs), then lets an autoscaling/v2
// HorizontalPodAutoscaler bring it within its bounds through the same subresource.
func TestKubectlScaleAppService(t *testing.T) {
	ns := env.NamespaceAt(t, "baseline") // the sample's nginx runs as root
	kubectl(t, "apply", "-n", ns, "-f", "config/samples/apps_v1_appservice.yaml")
	waitEqual(t, ns, "appservice/nginx-app", "{.status.ready}", "2/2")

	kubectl(t, "scale", "-n", ns, "appservice/nginx-app", "--replicas", "5")
	waitEqual(t, ns, "appservice/nginx-app", "{.spec.size}", "5")
	waitEqual(t, ns, "deployment/nginx-app", "{.spec.replicas}", "5")
	waitEqual(t, ns, "appservice/nginx-app", "{.status.replicas}", "5")
	s := readScale(t, "/apis/apps.middleware-operator.io/v1/namespaces/"+ns+"/appservices/nginx-app/scale")
	if s.Spec.Replicas != 5 || s.Status.Replicas != 5 {
		t.Errorf("scale spec/status replicas = %d/%d, want 5/5", s.Spec.Replicas, s.Status.Replicas)
	}
	podSelector := kubectl(t, "get", "-n", ns, "deployment/nginx-app", "-o", "jsonpath={.spec.selector.matchLabels}")
	for _, l := range strings.Split(s.Status.Selector, ",") {
		k, v, _ := strings.Cut(l, "=")
		if !strings.Contains(podSelector, `"`+k+`":"`+v+`"`) {
			t.Errorf("the scale's selector %q has %s, which the Deployment's selector %s lacks", s.Status.Selector, l, podSelector)
		}
	}
	if pods := kubectl(t, "get", "pods", "-n", ns, "-l", s.Status.Selector, "-o", "name"); strings.Count(pods, "pod/") != 5 {
		t.Errorf("the scale's selector %q selects these pods, want 5:\n%s", s.Status.Selector, pods)
	}

	// Above its maxReplicas the HPA scales down without needing any metric (the local
	// cluster has no metrics server), through the scale subresource only.
	hpa := filepath.Join(t.TempDir(), "hpa.yaml")
	if err := os.WriteFile(hpa, []byte(`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: nginx-app
spec:
  scaleTargetRef:
    apiVersion: apps.middleware-operator.io/v1
    kind: AppService
    name: nginx-app
  minReplicas: 2
  maxReplicas: 3
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 80}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-n", ns, "-f", hpa)
	waitEqual(t, ns, "hpa/nginx-app", `{.status.conditions[?(@.type=="AbleToScale")].status}`, "True")
	waitEqual(t, ns, "appservice/nginx-app", "{.spec.size}", "3")
	waitEqual(t, ns, "deployment/nginx-app", "{.spec.replicas}", "3")
	waitEqual(t, ns, "hpa/nginx-app", "{.status.currentReplicas}", "3")
	if s := readScale(t, "/apis/apps.middleware-operator.io/v1/namespaces/"+ns+"/appservices/nginx-app/scale"); s.Spec.Replicas != 3 {
		t.Errorf("after the HPA the scale's spec.replicas = %d, want 3", s.Spec.Replicas)
	}
	kubectl(t, "delete", "-n", ns, "hpa/nginx-app", "appservice/nginx-app", "--wait=true")
}

// TestKubectlScaleRedisCluster scales a RedisCluster with kubectl scale: the spec changes and
// the scale reads it back, and a size Redis Cluster cannot run is refused with the CRD's
// message. (The e2e cluster runs no Redis processes: the rebalancing itself is the
// RedisCluster suite's.)
func TestKubectlScaleRedisCluster(t *testing.T) {
	ns := env.Namespace(t)
	kubectl(t, "apply", "-n", ns, "-f", "config/samples/redis_v1alpha1_rediscluster.yaml")
	const name = "redis-cluster" // the sample's

	kubectl(t, "scale", "-n", ns, "rediscluster/"+name, "--replicas", "8")
	waitEqual(t, ns, "rediscluster/"+name, "{.spec.replicas}", "8")
	if s := readScale(t, "/apis/redis.middleware-operator.io/v1alpha1/namespaces/"+ns+"/redisclusters/"+name+"/scale"); s.Spec.Replicas != 8 {
		t.Errorf("the scale's spec.replicas = %d, want 8", s.Spec.Replicas)
	}

	out, err := kubectlErr("scale", "-n", ns, "rediscluster/"+name, "--replicas", "4")
	if err == nil || !strings.Contains(out, "spec.replicas is too small: Redis Cluster needs at least 3 masters") {
		t.Errorf("kubectl scale --replicas 4 = %v, want the CRD's refusal:\n%s", err, out)
	}
	waitEqual(t, ns, "rediscluster/"+name, "{.spec.replicas}", "8")
	kubectl(t, "delete", "-n", ns, "rediscluster/"+name, "--wait=false")
}

// waitEqual waits until kubectl get's jsonpath of an object in ns reads want.
func waitEqual(t *testing.T, ns, what, jsonpath, want string) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, func(context.Context) (bool, string) {
		out, err := kubectlErr("get", "-n", ns, what, "-o", "jsonpath="+jsonpath)
		return err == nil && strings.TrimSpace(out) == want, what + " " + jsonpath + " = " + out + ", want " + want
	})
}
