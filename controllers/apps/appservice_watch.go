package apps

import (
	"context"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/middleware-operator/middleware-operator/internal/child"
)

// specChanged passes the AppService events a reconcile has work for: all but the updates
// that change neither the generation nor the deletion timestamp, which are the operator's
// own status writes (an AppService's labels and annotations reach no child). A resync, an
// update with the same resourceVersion, passes.
var specChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	older, newer := e.ObjectOld, e.ObjectNew
	return older.GetGeneration() != newer.GetGeneration() || older.GetResourceVersion() == newer.GetResourceVersion() ||
		!newer.GetDeletionTimestamp().Equal(older.GetDeletionTimestamp())
}}

// deploymentChanged passes the Deployment events that can change what the owner's reconcile
// writes (see deploymentNews), less the echo of the operator's own update of it (see
// child.Echoes); creations, deletions and resyncs all pass.
func deploymentChanged(echoes *child.Echoes) predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			older, okOld := e.ObjectOld.(*appsv1.Deployment)
			newer, okNew := e.ObjectNew.(*appsv1.Deployment)
			if !okOld || !okNew || older.ResourceVersion == newer.ResourceVersion {
				return true
			}
			return !echoes.Echo(newer) && deploymentNews(older, newer)
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			echoes.Forget(e.Object)
			return true
		},
	}
}

// RolloutNewsPriority is the work queue priority of an AppService's reconcile started by
// its Deployment's rollout news (its end, a failure) or by a timed look at its rollout:
// below a spec change's (0), so in a fleet-wide image change the spec changes queued are
// served before the statuses of the rollouts that end meanwhile are written; above the
// start-up list's (handler.LowPriority).
const RolloutNewsPriority = -1

// behindSpecChanges enqueues what its handler enqueues for a Deployment's rollout news at
// RolloutNewsPriority, unless the handler sets a priority of its own (the start-up list's).
// An edit of the Deployment by another writer (its spec or metadata) and its deletion keep
// the default priority: their repair is a child write like a spec change's.
type behindSpecChanges struct{ handler.EventHandler }

func (h behindSpecChanges) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Create(ctx, e, lowered(q))
}

func (h behindSpecChanges) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if edited(e.ObjectOld, e.ObjectNew) {
		h.EventHandler.Update(ctx, e, q)
		return
	}
	h.EventHandler.Update(ctx, e, lowered(q))
}

func (h behindSpecChanges) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Delete(ctx, e, q)
}

func (h behindSpecChanges) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Generic(ctx, e, lowered(q))
}

// edited reports whether a child's update from older to newer changed its spec (the
// generation) or the metadata the operator sets: an edit to revert (the operator's own
// update does not get this far, see deploymentChanged).
func edited(older, newer client.Object) bool {
	return older.GetGeneration() != newer.GetGeneration() || !newer.GetDeletionTimestamp().Equal(older.GetDeletionTimestamp()) ||
		!maps.Equal(older.GetLabels(), newer.GetLabels()) || !maps.Equal(older.GetAnnotations(), newer.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(older.GetOwnerReferences(), newer.GetOwnerReferences())
}

// lowered is q adding at RolloutNewsPriority by default (a controller's queue is always a
// priority queue; one that is not is returned as it is).
func lowered(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return loweredQueue{pq}
	}
	return q
}

type loweredQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q loweredQueue) Add(r reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, r) }

func (q loweredQueue) AddAfter(r reconcile.Request, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, r)
}

func (q loweredQueue) AddRateLimited(r reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, r)
}

func (q loweredQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(RolloutNewsPriority)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

// rolloutState is what an AppService's status takes from its Deployment, less the replica
// counts of a rollout under way (held back: see statusWait).
type rolloutState struct {
	rollingOut, available bool
	problem               rolloutProblem
}

func rolloutStateOf(d *appsv1.Deployment) rolloutState {
	size := ptr.Deref(d.Spec.Replicas, 1)
	return rolloutState{rollingOut: rollingOut(d, size), available: d.Status.AvailableReplicas >= size, problem: deploymentStuck(d)}
}

// deploymentNews reports whether a Deployment's update from older to newer is one its
// AppService's reconcile must see: a change of its spec or metadata (an edit to revert), of
// its rollout's state (started, over, available or not, failed or past its deadline), or of
// its replica counts at rest. The steps of a rollout under way, dozens of status updates
// per Deployment in a fleet-wide image change, are not: each re-ran the owner's reconcile
// for nothing it would write.
func deploymentNews(older, newer *appsv1.Deployment) bool {
	if edited(older, newer) {
		return true
	}
	was, is := rolloutStateOf(older), rolloutStateOf(newer)
	if was != is {
		return true
	}
	o, n := older.Status, newer.Status
	return !is.rollingOut && (o.Replicas != n.Replicas || o.ReadyReplicas != n.ReadyReplicas ||
		o.AvailableReplicas != n.AvailableReplicas || o.UpdatedReplicas != n.UpdatedReplicas)
}
