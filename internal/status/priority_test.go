package status

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestStatusChangesLast(t *testing.T) {
	deployment := func(mutate func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns", Generation: 2, ResourceVersion: "10",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"hash": "a"},
			OwnerReferences: []metav1.OwnerReference{{Name: "web", UID: "u1"}},
		}}
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		next func(*appsv1.Deployment)
		want int
	}{
		{"status only", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.Status.ReadyReplicas = 1 }, MirrorPriority},
		{"spec", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.Generation = 3 }, 0},
		{"label", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.Labels = map[string]string{"app": "db"} }, 0},
		{"annotation", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.Annotations = nil }, 0},
		{"owner", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.OwnerReferences[0].UID = "u2" }, 0},
		{"deletion", func(d *appsv1.Deployment) {
			d.ResourceVersion = "11"
			d.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			enqueue := handler.Funcs{UpdateFunc: func(_ context.Context, e event.UpdateEvent, q handlerQueue) {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: e.ObjectNew.GetName()}})
			}}
			StatusChangesLast(enqueue).Update(t.Context(), event.UpdateEvent{ObjectOld: deployment(nil), ObjectNew: deployment(tc.next)}, q)
			item, priority, _ := q.GetWithPriority()
			if item.Name != "web" || priority != tc.want {
				t.Errorf("enqueued %v at priority %d, want web at %d", item, priority, tc.want)
			}
		})
	}
}

func TestStatusChangesLastKeepsALowerPriority(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: "10"}}
	lower := handler.Funcs{UpdateFunc: func(_ context.Context, _ event.UpdateEvent, q handlerQueue) {
		q.(priorityqueue.PriorityQueue[reconcile.Request]).AddWithOpts(priorityqueue.AddOpts{Priority: new(MirrorPriority - 1)}, reconcile.Request{})
	}}
	StatusChangesLast(lower).Update(t.Context(), event.UpdateEvent{ObjectOld: d, ObjectNew: d.DeepCopy()}, q)
	if _, priority, _ := q.GetWithPriority(); priority != MirrorPriority-1 {
		t.Errorf("priority %d, want the handler's own %d", priority, MirrorPriority-1)
	}
}

func TestMirror(t *testing.T) {
	r := Mirror(5 * time.Second)
	if r.RequeueAfter != 5*time.Second || r.Priority == nil || *r.Priority != MirrorPriority {
		t.Errorf("Mirror(5s) = %+v, want a requeue after 5s at priority %d", r, MirrorPriority)
	}
}

type handlerQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]
