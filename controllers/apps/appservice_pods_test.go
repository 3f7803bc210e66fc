package apps

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

// TestPodCheck: the pods are read only once a rollout with pods not ready has made no
// progress for the whole delay, counted from the Deployment's last progress (or its
// creation); a rollout under way is looked at again each delay, one that is over never.
func TestPodCheck(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const after = 30 * time.Second
	deployment := func(generation int64, replicas, ready int32, progressed time.Duration) *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: generation, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: 1, ReadyReplicas: ready, AvailableReplicas: ready},
		}
		if progressed >= 0 {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
				Reason: "ReplicaSetUpdated", LastUpdateTime: metav1.NewTime(now.Add(-progressed))}}
		}
		return d
	}
	cases := []struct {
		name string
		d    *appsv1.Deployment
		due  bool
		next time.Duration
	}{
		{"no Deployment", nil, false, 0},
		{"rolled out", deployment(2, 1, 1, time.Hour), false, 0},
		{"a new pod not ready, progress 10 s ago", deployment(2, 2, 1, 10*time.Second), false, 20 * time.Second},
		{"a new pod not ready, progress 30 s ago", deployment(2, 2, 1, after), true, after},
		{"a new pod not ready, progress 61 s ago: next look at twice as still", deployment(2, 2, 1, 61*time.Second), true, 61 * time.Second},
		{"a new pod not ready, progress 4 min ago", deployment(2, 2, 1, 4*time.Minute), true, 4 * time.Minute},
		{"a new pod not ready, progress an hour ago: looks 5 min apart", deployment(2, 2, 1, time.Hour), true, PodCheckMaxInterval},
		{"every pod ready, the Deployment controller behind", deployment(2, 2, 2, 40*time.Second), false, 40 * time.Second},
		{"the new template not yet observed, every pod ready", deployment(3, 1, 1, time.Hour), false, PodCheckMaxInterval},
		{"no Progressing condition: counted from creation", deployment(2, 2, 1, -1), true, PodCheckMaxInterval},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			due, next := podCheck(c.d, 1, now, after)
			if due != c.due || next != c.next {
				t.Errorf("podCheck = %v, %v; want %v, %v", due, next, c.due, c.next)
			}
		})
	}
}

// TestPodsFailing: a container waiting for a reason no wait ends is reported with its
// pod, its message and what to fix, the first pod by name; waiting to be created, running
// or crashed once is not.
func TestPodsFailing(t *testing.T) {
	pod := func(name, reason, message string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app"}}
		if reason != "" {
			p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: message}
		} else {
			p.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{}
		}
		return p
	}
	pull := `Back-off pulling image "nginx:nope"`
	cases := []struct {
		name         string
		pods         []corev1.Pod
		reason, want string
	}{
		{"none", nil, "", ""},
		{"running", []corev1.Pod{pod("web-a", "", "")}, "", ""},
		{"being created", []corev1.Pod{pod("web-a", "ContainerCreating", "")}, "", ""},
		{"image pull back-off", []corev1.Pod{pod("web-a", "", ""), pod("web-b", "ImagePullBackOff", pull)},
			"ImagePullBackOff", `pod web-b, container app: ImagePullBackOff: Back-off pulling image "nginx:nope" (check spec.image and the registry's credentials)`},
		{"the first pod by name", []corev1.Pod{pod("web-c", "CrashLoopBackOff", ""), pod("web-b", "InvalidImageName", "")},
			"InvalidImageName", "pod web-b, container app: InvalidImageName (spec.image is not a valid image reference)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := podsFailing(c.pods)
			if got.reason != c.reason || got.message != c.want {
				t.Errorf("podsFailing = %q, %q; want %q, %q", got.reason, got.message, c.reason, c.want)
			}
		})
	}
}

// TestRolloutStuck: pods the API server refuses come first, then a container that cannot
// start (the cause), then the progress deadline (the symptom).
func TestRolloutStuck(t *testing.T) {
	condition := func(typ appsv1.DeploymentConditionType, reason string) *appsv1.Deployment {
		d := readyDeployment()
		d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: reason})
		return d
	}
	pull := rolloutProblem{"ErrImagePull", "pod web-a"}
	cases := []struct {
		name    string
		d       *appsv1.Deployment
		failing rolloutProblem
		want    string
	}{
		{"nothing", readyDeployment(), rolloutProblem{}, ""},
		{"a pull failure", readyDeployment(), pull, "ErrImagePull"},
		{"past the deadline, and why", condition(appsv1.DeploymentProgressing, "ProgressDeadlineExceeded"), pull, "ErrImagePull"},
		{"past the deadline", condition(appsv1.DeploymentProgressing, "ProgressDeadlineExceeded"), rolloutProblem{}, ReasonRolloutStuck},
		{"pods refused", condition(appsv1.DeploymentReplicaFailure, "FailedCreate"), pull, ReasonReplicaFailure},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := rolloutStuck(c.d, c.failing); got.reason != c.want {
				t.Errorf("rolloutStuck = %q, want %q", got.reason, c.want)
			}
		})
	}
}

// TestSooner: the reconcile's next look is the shorter of two waits, 0 meaning none.
func TestSooner(t *testing.T) {
	for _, c := range []struct{ a, b, want time.Duration }{
		{0, 0, 0}, {0, time.Second, time.Second}, {time.Second, 0, time.Second},
		{time.Second, 2 * time.Second, time.Second}, {3 * time.Second, 2 * time.Second, 2 * time.Second},
	} {
		if got := sooner(c.a, c.b); got != c.want {
			t.Errorf("sooner(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
}

// countingReader counts the LISTs it is asked for and returns no pods.
type countingReader struct {
	client.Reader
	lists int
}

func (c *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	c.lists++
	return nil
}

// TestPodChecksAreBounded: of many rollouts standing still at once, only as many pods are
// read as the operator-wide bound allows; each of the others gets its own turn, a second
// apart, and its check is made at that turn (a deferred check waited a doubled stillness:
// with a 3 s check, 45 s, and a failed image went unreported for a whole test's wait).
func TestPodChecksAreBounded(t *testing.T) {
	reader := &countingReader{}
	r := &AppServiceReconciler{APIReader: reader, podChecks: newPodChecks(), PodCheckAfter: 3 * time.Second}
	stalled := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2, CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1},
	}
	const n = 20
	apps := make([]*appsv1api.AppService, n)
	var turns []time.Duration
	for i := range apps {
		apps[i] = &appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "ns"}, Spec: appsv1api.AppServiceSpec{Size: ptr.To[int32](1)}}
		_, next := r.failingPods(t.Context(), apps[i], stalled)
		turns = append(turns, next)
	}
	if reader.lists < 1 || reader.lists > PodChecksPerSecond+1 {
		t.Errorf("%d pod LISTs for %d stalled rollouts at once, want 1 to %d", reader.lists, n, PodChecksPerSecond+1)
	}
	// The deferred ones are due at their turns: about one second apart, the last about n-1
	// seconds on, not at PodCheckMaxInterval.
	last := turns[n-1]
	if last < time.Duration(n-3)*time.Second || last > time.Duration(n)*time.Second {
		t.Errorf("the last of %d deferred checks comes after %s, want about %d s: turns %v", n, last, n-1, turns)
	}
	for i := 2; i < n; i++ {
		if turns[i] <= turns[i-1] {
			t.Fatalf("turns %v: not one after another", turns)
		}
	}
	// Asked again before its turn, a rollout waits for the rest of it; at its turn it is read.
	if ok, wait := r.podChecks.Take(types.NamespacedName{Namespace: "ns", Name: "web-5"}, time.Now()); ok || wait <= 0 {
		t.Errorf("web-5 before its turn: check %v, wait %s", ok, wait)
	}
	if ok, _ := r.podChecks.Take(types.NamespacedName{Namespace: "ns", Name: "web-5"}, time.Now().Add(turns[5])); !ok {
		t.Error("web-5 at its turn: not checked")
	}
	r.podChecks.Drop(types.NamespacedName{Namespace: "ns", Name: "web-6"})
	if len(r.podChecks.turns) != n-1-2 {
		t.Errorf("%d turns held after one taken and one dropped, want %d", len(r.podChecks.turns), n-3)
	}
}
