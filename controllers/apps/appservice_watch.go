package apps

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
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
// writes (see deploymentNews); creations, deletions and resyncs all pass.
var deploymentChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	older, okOld := e.ObjectOld.(*appsv1.Deployment)
	newer, okNew := e.ObjectNew.(*appsv1.Deployment)
	return !okOld || !okNew || older.ResourceVersion == newer.ResourceVersion || deploymentNews(older, newer)
}}

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
	if older.Generation != newer.Generation || !newer.DeletionTimestamp.Equal(older.DeletionTimestamp) ||
		!maps.Equal(older.Labels, newer.Labels) || !maps.Equal(older.Annotations, newer.Annotations) ||
		!equality.Semantic.DeepEqual(older.OwnerReferences, newer.OwnerReferences) {
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
