package status

import (
	"context"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// MirrorPriority is the work-queue priority of a reconcile that has only a status to
// report: a child's rollout progress, or a status write the Pacer held back. It is below
// the default priority of a spec change, and controller-runtime's priority queue serves
// higher priorities first, so under a wave of changes the operator carries every spec to
// its children before it reports on any of them: measured in tests/bench, status writes
// interleaved with the wave took the API server's capacity from the Deployment updates
// the user was waiting for.
const MirrorPriority = handler.LowPriority

// StatusChangesLast wraps h, a handler that enqueues a child's owner, so that an update
// which leaves the child's generation, labels, annotations, owners and deletion as they
// were (for a Deployment or a StatefulSet, a change of status only) enqueues the owner at
// MirrorPriority. Every other event keeps h's priority.
func StatusChangesLast(h handler.EventHandler) handler.EventHandler {
	return statusChangesLast{h}
}

type statusChangesLast struct{ handler.EventHandler }

// Update enqueues through h, at MirrorPriority when only the child's status changed.
func (s statusChangesLast) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || e.ObjectOld == nil || e.ObjectNew == nil || !statusOnly(e.ObjectOld, e.ObjectNew) {
		s.EventHandler.Update(ctx, e, q)
		return
	}
	s.EventHandler.Update(ctx, e, mirrorQueue{pq})
}

// statusOnly reports whether next differs from old in nothing a reconcile enforces.
func statusOnly(old, next client.Object) bool {
	return old.GetGeneration() == next.GetGeneration() &&
		maps.Equal(old.GetLabels(), next.GetLabels()) &&
		maps.Equal(old.GetAnnotations(), next.GetAnnotations()) &&
		equality.Semantic.DeepEqual(old.GetOwnerReferences(), next.GetOwnerReferences()) &&
		equality.Semantic.DeepEqual(old.GetDeletionTimestamp(), next.GetDeletionTimestamp())
}

// mirrorQueue adds at MirrorPriority unless a lower priority is asked for.
type mirrorQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (m mirrorQueue) Add(item reconcile.Request) { m.AddWithOpts(priorityqueue.AddOpts{}, item) }

func (m mirrorQueue) AddAfter(item reconcile.Request, after time.Duration) {
	m.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

func (m mirrorQueue) AddRateLimited(item reconcile.Request) {
	m.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

func (m mirrorQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil || *o.Priority > MirrorPriority {
		o.Priority = new(MirrorPriority)
	}
	m.PriorityQueue.AddWithOpts(o, items...)
}

// Mirror is a reconcile result that looks again after wait at MirrorPriority.
func Mirror(wait time.Duration) reconcile.Result {
	return reconcile.Result{RequeueAfter: wait, Priority: new(MirrorPriority)}
}
