package redis

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestListPodsThroughTheIndex: a look lists its cluster's pods, by ordinal, and no other
// pod (another cluster's, another kind's with the same instance label, another
// namespace's), whether it goes through podClusterIndex or matches labels, as a
// reconciler built without SetupWithManager does.
func TestListPodsThroughTheIndex(t *testing.T) {
	pod := func(ns, name, kind, instance string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{resources.LabelName: kind, resources.LabelInstance: instance}}}
	}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithIndex(&corev1.Pod{}, podClusterIndex, podCluster).WithObjects(
		pod("a", "rc-10", resources.RedisClusterKind, "rc"), pod("a", "rc-2", resources.RedisClusterKind, "rc"),
		pod("a", "rc-1", resources.RedisClusterKind, "rc"), pod("a", "other-0", resources.RedisClusterKind, "other"),
		pod("a", "rc-app-0", "AppService", "rc"), pod("b", "rc-0", resources.RedisClusterKind, "rc"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unlabelled"}},
	).Build()
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "rc"}}
	for _, indexed := range []bool{true, false} {
		r := &RedisClusterReconciler{Client: c, podsIndexed: indexed}
		s := &state{rc: rc}
		if err := r.listPods(t.Context(), s); err != nil {
			t.Fatalf("indexed %t: %v", indexed, err)
		}
		var names []string
		for _, p := range s.pods {
			names = append(names, p.Name)
		}
		if want := []string{"rc-1", "rc-2", "rc-10"}; !slices.Equal(names, want) {
			t.Errorf("indexed %t: listed %v, want %v", indexed, names, want)
		}
	}
	if got := podCluster(pod("a", "rc-app-0", "AppService", "rc")); got != nil {
		t.Errorf("an AppService pod is indexed under %v", got)
	}
}
