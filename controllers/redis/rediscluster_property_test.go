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
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// randomRedisCluster draws a valid spec (sizes, replicas per master, strategies, pod
// settings, password source), then changes up to two fields to values at and around the
// boundaries the API knows of: sizes, image repository and tag, update strategies and their
// slots, pipelines, pod labels that try to override the operator's, env names, volumes,
// quantities, exporter images, and password Secrets that do not exist or cannot.
func randomRedisCluster(r *rand.Rand, ns string, i int) *redisv1alpha1.RedisCluster {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prop-%03d", i), Namespace: ns}}
	rc.Spec.Replicas = pick32(r, 3, 6, 7, 9)
	if rc.Spec.Replicas >= 6 || r.IntN(2) == 0 {
		rc.Spec.ReplicasPerMaster = ptr.To(min(pick32(r, 0, 1), rc.Spec.Replicas/3-1))
	} else {
		rc.Spec.ReplicasPerMaster = ptr.To[int32](0)
	}
	if r.IntN(3) == 0 {
		rc.Spec.UpdateStrategy.Type = redisv1alpha1.AutoReceive
	}
	pod := redisv1alpha1.PodSpec{}
	if r.IntN(2) == 0 {
		pod.Labels = map[string]string{"team": "cache"}
		q := resource.MustParse(pick("1Gi", "10Gi"))
		pod.Volumes = &redisv1alpha1.Volumes{Type: redisv1alpha1.VolumeType(pick("pvc", "hostPath")), Size: &q}
		pod.Volumes.AllowHostPath = pod.Volumes.Type == "hostPath"
		pod.MonitorImage = pick("", "oliver006/redis_exporter:v1.62.0")
	}
	if r.IntN(3) == 0 {
		rc.Spec.PasswordSecret = "cache-auth"
	}
	mutations := []func(){
		func() { rc.Spec.Replicas = pick32(r, 0, 2, 5, 1000, 1001) },
		func() { rc.Spec.ReplicasPerMaster = ptr.To(pick32(r, -1, 2, 5, 6)) },
		func() {
			rc.Spec.Repository = pick("registry.example.com:5000/cache/redis", "Redis", "bad repo", strings.Repeat("r", 256))
		},
		func() { rc.Spec.Version = pick("7.2", "7 0", "-bad", strings.Repeat("v", 129)) },
		func() {
			rc.Spec.UpdateStrategy.Type = redisv1alpha1.AssignReceive
			for range r.IntN(3) {
				rc.Spec.UpdateStrategy.AssignStrategies = append(rc.Spec.UpdateStrategy.AssignStrategies,
					redisv1alpha1.AssignStrategy{Slots: pick32(r, -1, 0, 100, 16384, 16385), FromReplicas: pick("", "n1,n2", "bad id")})
			}
		},
		func() { rc.Spec.UpdateStrategy.Type = redisv1alpha1.UpdateStrategyType(pick("Bogus", "")) },
		func() {
			rc.Spec.UpdateStrategy.Pipeline = ptr.To(intstr.FromString(pick("0", "100", "10000", "10001", "lots")))
		},
		func() {
			pod.Labels = map[string]string{pick("app.kubernetes.io/instance", "team", "bad key!"): pick("x", "", "bad value!")}
		},
		func() { pod.Env = []corev1.EnvVar{{Name: pick("A", "", "x=y"), Value: "v"}} },
		func() {
			q := resource.MustParse(pick("1Gi", "0", "100Ti"))
			pod.Volumes = &redisv1alpha1.Volumes{Type: redisv1alpha1.VolumeType(pick("pvc", "hostPath", "nfs", "bogus")), Size: &q,
				PersistentVolumeClaimName: pick("", "shared"), StorageClassName: pick("", "Bad Class!")}
		},
		func() {
			pod.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick("64Mi", "1Gi"))}
			pod.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick("64Mi", "2Gi"))}
		},
		func() { pod.MonitorImage = pick("oliver006/redis_exporter:v1.62.0", strings.Repeat("m", 513)) },
		func() { rc.Spec.PasswordSecret = pick("missing", "Bad_Name") },
		func() { rc.Spec.Pause = true },
	}
	for range r.IntN(3) {
		mutations[r.IntN(len(mutations))]()
	}
	rc.Spec.Pod = []redisv1alpha1.PodSpec{pod}
	if r.IntN(10) == 0 {
		rc.Spec.Pod = append(rc.Spec.Pod, pod) // at most one entry
	}
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

// TestRedisClusterInvalidStringsAreRejected: every string field that becomes an image, a
// Kubernetes name or an environment variable name refuses random invalid values (a space,
// tab, newline, control or non-ASCII character anywhere, or a malformed name) naming the
// field.
func TestRedisClusterInvalidStringsAreRejected(t *testing.T) {
	t.Parallel()
	rcOf := func(o client.Object) *redisv1alpha1.RedisCluster { return o.(*redisv1alpha1.RedisCluster) } //nolint:forcetypeassert // only RedisClusters
	pod := func(o client.Object) *redisv1alpha1.PodSpec { return &rcOf(o).Spec.Pod[0] }
	type field = testenv.StringField[client.Object]
	env.RejectInvalidStrings(t, 12, 30, func(ns string) client.Object {
		rc := redistest.NewCluster(ns, "strings", 6)
		rc.Spec.Pod = []redisv1alpha1.PodSpec{{Volumes: &redisv1alpha1.Volumes{}}}
		return rc
	}, []field{
		{Path: "spec.repository", Kind: "image", Valid: "registry.example.com:5000/cache/redis", Set: func(o client.Object, v string) { rcOf(o).Spec.Repository = v }},
		{Path: "spec.version", Kind: "image", Valid: "7.2.5", Set: func(o client.Object, v string) { rcOf(o).Spec.Version = v }},
		{Path: "spec.pod[0].middlewareImage", Kind: "image", Valid: "registry.example.com:5000/cache/redis:7.2.5", Set: func(o client.Object, v string) { pod(o).MiddlewareImage = v }},
		{Path: "spec.pod[0].monitorImage", Kind: "image", Valid: "oliver006/redis_exporter:v1.62.0", Set: func(o client.Object, v string) { pod(o).MonitorImage = v }},
		{Path: "spec.pod[0].initImage", Kind: "image", Valid: "busybox@sha256:" + strings.Repeat("ab", 32), Set: func(o client.Object, v string) { pod(o).InitImage = v }},
		{Path: "spec.pod[0].env", Kind: "env", Valid: "MAXMEMORY", Set: func(o client.Object, v string) { pod(o).Env = []corev1.EnvVar{{Name: v, Value: "2gb"}} }},
		{Path: "spec.pod[0].configmap", Kind: "name", Valid: "cache-conf", Set: func(o client.Object, v string) { pod(o).Configmap = v }},
		{Path: "spec.pod[0].volumes.storageClassName", Kind: "name", Valid: "fast-ssd", Set: func(o client.Object, v string) { pod(o).Volumes.StorageClassName = v }},
		{Path: "spec.passwordSecret", Kind: "name", Valid: "cache-auth", Set: func(o client.Object, v string) { rcOf(o).Spec.PasswordSecret = v }},
		{Path: "spec.tls.secretName", Kind: "name", Valid: "cache-tls", Set: func(o client.Object, v string) {
			rcOf(o).Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, SecretName: v}
		}},
		{Path: "spec.networkPolicy.metricsNamespace", Kind: "name", Valid: "monitoring", Set: func(o client.Object, v string) {
			rcOf(o).Spec.NetworkPolicy = &redisv1alpha1.NetworkPolicySpec{MetricsNamespace: v}
		}},
		{Path: "spec.acl.users[0].passwordSecret.name", Kind: "name", Valid: "reader-password", Set: func(o client.Object, v string) {
			rcOf(o).Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{
				{Name: "reader", Rules: "~* +@read", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: v}},
			}}
		}},
	})
}
