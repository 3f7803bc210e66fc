package apps

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

// TestDeploymentNews: which updates of an AppService's Deployment reach its reconcile. The
// steps of a rollout under way do not; its start, its end, a change of availability, a
// failure, an edit of the Deployment and the counts at rest do.
func TestDeploymentNews(t *testing.T) {
	at := func(change func(d *appsv1.Deployment)) *appsv1.Deployment {
		d := readyDeployment()
		d.Spec.Replicas = ptr.To[int32](2)
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 2, 2, 2, 2
		d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
		if change != nil {
			change(d)
		}
		return d
	}
	// A rollout of 2 replicas with one surge pod: the image change, observed, then its steps.
	started := func(d *appsv1.Deployment) { d.Generation = 3 }
	observed := func(d *appsv1.Deployment) {
		d.Generation, d.Status.ObservedGeneration, d.Status.UpdatedReplicas = 3, 3, 0
	}
	surged := func(d *appsv1.Deployment) {
		observed(d)
		d.Status.Replicas, d.Status.UpdatedReplicas = 3, 1
	}
	surgedReady := func(d *appsv1.Deployment) {
		surged(d)
		d.Status.ReadyReplicas, d.Status.AvailableReplicas = 3, 3
	}
	halfway := func(d *appsv1.Deployment) { // the first old pod gone
		observed(d)
		d.Status.UpdatedReplicas = 1
	}
	done := func(d *appsv1.Deployment) { d.Generation, d.Status.ObservedGeneration = 3, 3 }
	unavailable := func(d *appsv1.Deployment) {
		surged(d)
		d.Status.AvailableReplicas = 1
	}
	stuck := func(d *appsv1.Deployment) {
		surged(d)
		d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "too slow"})
	}
	refused := func(d *appsv1.Deployment) {
		surged(d)
		d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{
			Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "forbidden"})
	}
	cases := []struct {
		name         string
		older, newer func(d *appsv1.Deployment)
		news         bool
	}{
		{"nothing changed", nil, nil, false},
		{"the spec changed (an edit to revert, or the operator's update)", nil, started, true},
		{"an annotation changed", nil, func(d *appsv1.Deployment) { d.Annotations["deployment.kubernetes.io/revision"] = "2" }, true},
		{"a label changed", nil, func(d *appsv1.Deployment) { d.Labels = map[string]string{"x": "y"} }, true},
		{"the owner reference changed", nil, func(d *appsv1.Deployment) { d.OwnerReferences = []metav1.OwnerReference{{Name: "other"}} }, true},
		{"deletion started", nil, func(d *appsv1.Deployment) { d.DeletionTimestamp = &metav1.Time{} }, true},
		{"the controller observed the new spec", started, observed, false},
		{"a surge pod created", observed, surged, false},
		{"the surge pod ready", surged, surgedReady, false},
		{"an old pod gone", surgedReady, halfway, false},
		{"the rollout over", halfway, done, true},
		{"availability lost while rolling out", surged, unavailable, true},
		{"past the progress deadline", surged, stuck, true},
		{"pods refused", surged, refused, true},
		{"the deadline's message changed", stuck, func(d *appsv1.Deployment) {
			stuck(d)
			d.Status.Conditions[len(d.Status.Conditions)-1].Message = "still too slow"
		}, true},
		{"a ready pod lost at rest", nil, func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 1 }, true},
		{"scaled at rest: counts only", nil, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) }, true},
		{"a condition's heartbeat at rest", nil, func(d *appsv1.Deployment) {
			d.Status.Conditions[0].LastUpdateTime = metav1.Now()
		}, false},
	}
	for _, c := range cases {
		older, newer := at(c.older), at(c.newer)
		if got := deploymentNews(older, newer); got != c.news {
			t.Errorf("%s: deploymentNews = %t, want %t", c.name, got, c.news)
		}
		newer.ResourceVersion = "2"
		if got := deploymentChanged.Update(event.UpdateEvent{ObjectOld: older, ObjectNew: newer}); got != c.news {
			t.Errorf("%s: the predicate passes %t, want %t", c.name, got, c.news)
		}
	}
	if !deploymentChanged.Update(event.UpdateEvent{ObjectOld: at(nil), ObjectNew: at(nil)}) {
		t.Error("a resync (the same resourceVersion) did not pass")
	}
}

// TestSpecChanged: an AppService's own status writes do not re-run its reconcile; a spec
// change, a deletion and a resync do.
func TestSpecChanged(t *testing.T) {
	app := func(gen int64, rv string, status string) *appsv1api.AppService {
		return &appsv1api.AppService{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: gen, ResourceVersion: rv},
			Status:     appsv1api.AppServiceStatus{Ready: status},
		}
	}
	deleting := app(1, "3", "1/1")
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		name         string
		older, newer *appsv1api.AppService
		pass         bool
	}{
		{"a status write", app(1, "1", "0/1"), app(1, "2", "1/1"), false},
		{"a spec change", app(1, "1", "1/1"), app(2, "2", "1/1"), true},
		{"a deletion", app(1, "2", "1/1"), deleting, true},
		{"a resync", app(1, "2", "1/1"), app(1, "2", "1/1"), true},
	}
	for _, c := range cases {
		if got := specChanged.Update(event.UpdateEvent{ObjectOld: c.older, ObjectNew: c.newer}); got != c.pass {
			t.Errorf("%s: passes %t, want %t", c.name, got, c.pass)
		}
	}
}
