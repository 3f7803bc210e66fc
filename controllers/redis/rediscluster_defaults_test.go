package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
)

// TestRedisClusterSecureDefaultsOnRunningNodes: a cluster whose user redis.conf
// (spec.pod[0].configmap) turns on DEBUG, MODULE and the protected configs runs nodes that
// refuse all three, because the operator's lines come last; its pods, as the API server
// stores them, mount no ServiceAccount token. The local cluster runs the real redis-server
// with the generated redis.conf; it does not enforce a read-only root file system, which
// TestRedisPodsMountNoTokenAndWriteOnlyTheirVolumes checks on the template.
func TestRedisClusterSecureDefaultsOnRunningNodes(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "opening-user", Namespace: ns}, Data: map[string]string{
		"redis.conf": "enable-debug-command yes\nenable-module-command yes\nenable-protected-configs yes\n",
	}}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	rc := smallCluster(ns, "locked")
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{Configmap: cm.Name}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	rc = redistest.WaitShape(t, env.Client, client.ObjectKeyFromObject(rc), 3, 3)
	pw := redistest.Password(t, env.Client, ns, rc.Name)

	for _, n := range rc.Status.Nodes {
		c := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: pw, Protocol: 2, MaxRetries: -1, DisableIdentity: true})
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		redistest.CheckLockedDown(t, c, n.Name)
		_ = c.Close()
	}

	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels(objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name))); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Fatalf("%d pods, want 3", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
			t.Errorf("pod %s: automountServiceAccountToken %v, want false", p.Name, p.Spec.AutomountServiceAccountToken)
		}
		for _, v := range p.Spec.Volumes {
			if v.Projected != nil {
				for _, s := range v.Projected.Sources {
					if s.ServiceAccountToken != nil {
						t.Errorf("pod %s mounts a ServiceAccount token (volume %s)", p.Name, v.Name)
					}
				}
			}
		}
	}
}
