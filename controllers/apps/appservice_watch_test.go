package apps

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/child"
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
	changed := deploymentChanged(&child.Echoes{})
	for _, c := range cases {
		older, newer := at(c.older), at(c.newer)
		if got := deploymentNews(older, newer); got != c.news {
			t.Errorf("%s: deploymentNews = %t, want %t", c.name, got, c.news)
		}
		newer.ResourceVersion = "2"
		if got := changed.Update(event.UpdateEvent{ObjectOld: older, ObjectNew: newer}); got != c.news {
			t.Errorf("%s: the predicate passes %t, want %t", c.name, got, c.news)
		}
	}
	if !changed.Update(event.UpdateEvent{ObjectOld: at(nil), ObjectNew: at(nil)}) {
		t.Error("a resync (the same resourceVersion) did not pass")
	}
}

// TestDeploymentEchoes: the event of the operator's own update of a Deployment does not
// re-run the owner's reconcile, which already has the server's answer; any other writer's
// update passes as before, also one that follows the operator's.
func TestDeploymentEchoes(t *testing.T) {
	version := func(rv string, gen int64) *appsv1.Deployment {
		d := readyDeployment()
		d.ResourceVersion, d.Generation = rv, gen
		return d
	}
	update := func(changed predicate.Funcs, older, newer *appsv1.Deployment) bool {
		return changed.Update(event.UpdateEvent{ObjectOld: older, ObjectNew: newer})
	}
	echoes := &child.Echoes{}
	changed := deploymentChanged(echoes)

	echoes.Wrote(version("11", 3))
	if update(changed, version("10", 2), version("11", 3)) {
		t.Error("the echo of the operator's own spec update passed")
	}
	if !update(changed, version("11", 3), version("11", 3)) {
		t.Error("a resync after the echo did not pass")
	}
	// The echo come before the write's answer: it passes, and the record left matches
	// nothing after it.
	if !update(changed, version("40", 8), version("41", 9)) {
		t.Error("an update with no record was taken for an echo")
	}
	echoes.Wrote(version("41", 9))
	if !update(changed, version("41", 9), version("42", 10)) {
		t.Error("an edit after a late record was taken for an echo")
	}
	// Another writer's edit right after the operator's: its event is not the echo.
	echoes.Wrote(version("21", 5))
	if !update(changed, version("20", 4), version("22", 6)) {
		t.Error("an edit by another writer after the operator's own update did not pass")
	}
	// The record is spent by the first update after it, echo or not.
	if !update(changed, version("20", 4), version("21", 5)) {
		t.Error("an update after the record was spent was taken for an echo")
	}
	// A deletion forgets the record: a new Deployment of the same name is not an echo.
	echoes.Wrote(version("31", 7))
	if !changed.Delete(event.DeleteEvent{Object: version("31", 7)}) {
		t.Error("a deletion did not pass")
	}
	if !update(changed, version("30", 1), version("31", 2)) {
		t.Error("an update of a Deployment deleted since the operator's write was taken for an echo")
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

// TestRolloutNewsWaitBehindSpecChanges: an AppService's reconcile started by its
// Deployment's rollout news is served after the reconciles of spec changes queued with it;
// an edit or a deletion of the Deployment, a repair, is served with the spec changes; the
// start-up list keeps its own priority.
func TestRolloutNewsWaitBehindSpecChanges(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := appsv1api.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(appsv1api.GroupVersion.WithKind("AppService"), meta.RESTScopeNamespace)
	news := behindSpecChanges{handler.EnqueueRequestForOwner(scheme, mapper, &appsv1api.AppService{}, handler.OnlyControllerOwner())}
	owned := func(owner string, rv string) *appsv1.Deployment {
		d := readyDeployment()
		d.Namespace, d.Name, d.ResourceVersion = "apps", owner, rv
		d.OwnerReferences = []metav1.OwnerReference{{APIVersion: appsv1api.GroupVersion.String(), Kind: "AppService",
			Name: owner, UID: "u-" + types.UID(owner), Controller: ptr.To(true)}}
		return d
	}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	news.Update(t.Context(), event.UpdateEvent{ObjectOld: owned("rolled-out", "1"), ObjectNew: owned("rolled-out", "2")}, q)
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "apps", Name: "image-changed"}})
	news.Create(t.Context(), event.CreateEvent{Object: owned("listed-at-start", "3"), IsInInitialList: true}, q)
	editedByHand := owned("edited", "5")
	editedByHand.Generation++
	news.Update(t.Context(), event.UpdateEvent{ObjectOld: owned("edited", "4"), ObjectNew: editedByHand}, q)
	news.Delete(t.Context(), event.DeleteEvent{Object: owned("deleted", "6")}, q)
	if q.Len() != 5 {
		t.Fatalf("%d reconciles queued, want 5", q.Len())
	}

	want := []struct {
		name     string
		priority int
	}{
		{"image-changed", 0}, {"edited", 0}, {"deleted", 0},
		{"rolled-out", RolloutNewsPriority}, {"listed-at-start", handler.LowPriority},
	}
	for _, w := range want {
		item, priority, _ := q.GetWithPriority()
		if item.Name != w.name || priority != w.priority {
			t.Errorf("served %s at priority %d, want %s at %d", item.Name, priority, w.name, w.priority)
		}
		q.Done(item)
	}
}
