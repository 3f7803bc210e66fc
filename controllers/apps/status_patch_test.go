package apps_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/status"
)

// TestStatusPatchOfAnAlikeStatusWritesNothing (internal/status against a real API server,
// which this suite has): a status that differs from the object read only in a time's
// nanoseconds, which metav1.Time does not keep, leaves the object's resource version as it
// was, and status.Patch says it wrote nothing, so no StaleGuard waits for a newer version
// that never comes (a RedisCluster's status stood still for minutes that way); a real
// change says it wrote.
func TestStatusPatchOfAnAlikeStatusWritesNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// Never scheduled: no kubelet writes its status beside the test.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alike", Namespace: ns},
		Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "c", Image: "nginx", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}}}}}
	if err := env.Client.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	start := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	pod.Status.StartTime = &start
	if err := env.Client.Status().Update(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	podStatus := func(obj client.Object) any { return obj.(*corev1.Pod).Status } //nolint:forcetypeassert // pods only
	before := pod.DeepCopy()
	next := before.DeepCopy()
	nanos := metav1.NewTime(start.Add(300 * time.Millisecond))
	next.Status.StartTime = &nanos
	wrote, err := status.Patch(t.Context(), env.Client, before, next, podStatus)
	if err != nil || wrote || next.ResourceVersion != before.ResourceVersion {
		t.Errorf("a status alike but for a time's nanoseconds: wrote %v (%v), versions %s then %s: want no write, the same version",
			wrote, err, before.ResourceVersion, next.ResourceVersion)
	}
	next = before.DeepCopy()
	next.Status.Message = "changed"
	if wrote, err := status.Patch(t.Context(), env.Client, before, next, podStatus); err != nil || !wrote || next.ResourceVersion == before.ResourceVersion {
		t.Errorf("a changed message: wrote %v (%v), version %s: want a write and a new version", wrote, err, next.ResourceVersion)
	}
}
