package redis

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestListPodsThroughTheIndex: a look lists its cluster's pods, by ordinal, and no other
// pod (another cluster's, another kind's with the same instance label, another
// namespace's), whether it goes through podClusterIndex or matches labels, as a
// reconciler built without SetupWithManager does.
func TestListPodsThroughTheIndex(t *testing.T) {
	pod := func(ns, name, kind, instance string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{objectlabels.LabelName: kind, objectlabels.LabelInstance: instance}}}
	}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithIndex(&corev1.Pod{}, podClusterIndex, podCluster).WithObjects(
		pod("a", "rc-10", objectlabels.RedisClusterKind, "rc"), pod("a", "rc-2", objectlabels.RedisClusterKind, "rc"),
		pod("a", "rc-1", objectlabels.RedisClusterKind, "rc"), pod("a", "other-0", objectlabels.RedisClusterKind, "other"),
		pod("a", "rc-app-0", "AppService", "rc"), pod("b", "rc-0", objectlabels.RedisClusterKind, "rc"),
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

// TestReplacedPodCountsAsTerminatingUntilTheCacheShowsIt: a pod this process deleted is
// terminating in the snapshot while the cache still shows it running and Ready (an upgrade
// must not replace the next pod then), until the cache shows the deletion or the bound
// passes; another pod, or the new pod of the same name, is not.
func TestReplacedPodCountsAsTerminatingUntilTheCacheShowsIt(t *testing.T) {
	running := func(name, uid string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.1.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	rc6 := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Spec: redisv1alpha1.RedisClusterSpec{Replicas: 6}}
	var d deletedPods
	start := time.Now()
	d.mark("old", start)
	terminating := func(p corev1.Pod, at time.Time) bool {
		return clusterconn.PodObservations(rc6, []corev1.Pod{p}, func(p *corev1.Pod) bool { return d.pending(p, at) })[0].Terminating
	}
	if !terminating(running("rc-0", "old"), start.Add(time.Second)) {
		t.Errorf("the deleted pod, still running in the cache a second later, is not terminating")
	}
	if terminating(running("rc-1", "other"), start.Add(time.Second)) || terminating(running("rc-0", "new"), start.Add(time.Second)) {
		t.Errorf("a pod this process did not delete counts as terminating")
	}
	if !terminating(running("rc-0", "old"), start.Add(deletionSeenWithin-time.Second)) {
		t.Errorf("the deleted pod stopped counting as terminating before the cache showed it or the bound passed")
	}
	gone := running("rc-0", "old")
	gone.DeletionTimestamp = &metav1.Time{Time: start}
	if !terminating(gone, start.Add(2*time.Second)) {
		t.Errorf("a pod with a deletion timestamp is not terminating")
	}
	if d.pending(ptr.To(running("rc-0", "old")), start.Add(3*time.Second)) {
		t.Errorf("the deletion is still remembered after the cache showed it")
	}
	d.mark("late", start)
	if terminating(running("rc-2", "late"), start.Add(deletionSeenWithin+time.Second)) {
		t.Errorf("a deletion the cache never showed still counts after %s", deletionSeenWithin)
	}
}
