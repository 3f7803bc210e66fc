package redis_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// randomRedisCluster draws a spec at and around every boundary the API knows of: sizes and
// replicas per master, image repository and tag, update strategies and their slots, the pod
// settings (labels that try to override the operator's, env names, volumes, quantities), and
// password Secrets that exist, do not, or have an invalid name.
func randomRedisCluster(r *rand.Rand, ns string, i int) *redisv1alpha1.RedisCluster {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prop-%03d", i), Namespace: ns}}
	rc.Spec.Replicas = pick32(r, 0, 3, 5, 6, 6, 7, 9, 1000, 1001)
	if r.IntN(2) == 0 {
		rc.Spec.ReplicasPerMaster = ptr.To(pick32(r, -1, 0, 1, 2, 5, 6))
	}
	if r.IntN(3) == 0 {
		rc.Spec.Repository = pick("redis", "registry.example.com:5000/cache/redis", "Redis", "bad repo", strings.Repeat("r", 256))
	}
	if r.IntN(3) == 0 {
		rc.Spec.Version = pick("7.0.15", "7.2", "7 0", "-bad", strings.Repeat("v", 129))
	}
	switch r.IntN(5) {
	case 1:
		rc.Spec.UpdateStrategy.Type = redisv1alpha1.AutoReceive
	case 2:
		rc.Spec.UpdateStrategy.Type = redisv1alpha1.AssignReceive
		for range r.IntN(3) {
			rc.Spec.UpdateStrategy.AssignStrategies = append(rc.Spec.UpdateStrategy.AssignStrategies,
				redisv1alpha1.AssignStrategy{Slots: pick32(r, -1, 0, 100, 16384, 16385), FromReplicas: pick("", "n1,n2", "bad id")})
		}
	case 3:
		rc.Spec.UpdateStrategy.Type = redisv1alpha1.UpdateStrategyType(pick("Bogus", ""))
	}
	if r.IntN(4) == 0 {
		rc.Spec.UpdateStrategy.Pipeline = ptr.To(intstr.FromString(pick("0", "100", "10000", "10001", "lots")))
	}
	if r.IntN(3) == 0 {
		p := redisv1alpha1.PodSpec{}
		if r.IntN(2) == 0 {
			p.Labels = map[string]string{pick("app.kubernetes.io/instance", "team", "bad key!"): pick("x", "", "bad value!")}
		}
		if r.IntN(3) == 0 {
			p.Env = []corev1.EnvVar{{Name: pick("A", "", "x=y"), Value: "v"}}
		}
		if r.IntN(3) == 0 {
			q := resource.MustParse(pick("1Gi", "0", "100Ti"))
			p.Volumes = &redisv1alpha1.Volumes{Type: redisv1alpha1.VolumeType(pick("pvc", "hostPath", "nfs", "bogus")), Size: &q,
				PersistentVolumeClaimName: pick("", "shared"), StorageClassName: pick("", "Bad Class!")}
		}
		if r.IntN(3) == 0 {
			p.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick("64Mi", "1Gi"))}
			p.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick("64Mi", "2Gi"))}
		}
		if r.IntN(3) == 0 {
			p.MonitorImage = pick("oliver006/redis_exporter:v1.62.0", strings.Repeat("m", 513))
		}
		rc.Spec.Pod = []redisv1alpha1.PodSpec{p}
		if r.IntN(6) == 0 {
			rc.Spec.Pod = append(rc.Spec.Pod, p)
		}
	}
	if r.IntN(3) == 0 {
		rc.Spec.PasswordSecret = pick("cache-auth", "missing", "Bad_Name")
	}
	rc.Spec.Pause = r.IntN(6) == 0
	return rc
}

func pick32(r *rand.Rand, xs ...int32) int32 { return xs[r.IntN(len(xs))] }

// TestRedisClusterRandomSpecsAreRejectedOrReconciled is the property of
// testenv.RandomSpecs for RedisClusters (a paused one is owed no status); one that names a
// password Secret that does not exist is Degraded. The namespace admits no pod: the
// property is about admission and status, and 40 clusters' redis-servers would only slow
// the suite.
func TestRedisClusterRandomSpecsAreRejectedOrReconciled(t *testing.T) {
	t.Parallel()
	secret := func(ns string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cache-auth", Namespace: ns}, StringData: map[string]string{"password": "s3cret-pw"}}
		if err := env.Client.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	testenv.RandomSpecs[*redisv1alpha1.RedisCluster]{
		Controller: "rediscluster", N: 40, Salt: 13, Pods: 0, Setup: secret,
		Draw: randomRedisCluster,
		New:  func() *redisv1alpha1.RedisCluster { return &redisv1alpha1.RedisCluster{} },
		Status: func(rc *redisv1alpha1.RedisCluster) (int64, []metav1.Condition) {
			return rc.Status.ObservedGeneration, rc.Status.Conditions
		},
		Exempt: func(rc *redisv1alpha1.RedisCluster) bool { return rc.Spec.Pause },
		Check: func(t *testing.T, rc *redisv1alpha1.RedisCluster) {
			if rc.Spec.PasswordSecret == "missing" && !rc.Spec.Pause && !meta.IsStatusConditionTrue(rc.Status.Conditions, "Degraded") {
				t.Errorf("%s names a password Secret that does not exist, but is not Degraded: %+v", rc.Name, rc.Status.Conditions)
			}
		},
	}.Run(t, env)
}
