// Package status writes a custom resource's status only when it changed (with optimistic
// locking where the status carries state of its own), and sets conditions stamped with the
// generation they describe.
package status

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Patch writes obj's status when it differs from before's (the object as read, unchanged).
// It returns whether it wrote. The patch carries before's resourceVersion, so a status
// computed from a stale object fails with a conflict instead of overwriting a newer one.
func Patch(ctx context.Context, c client.Client, before, obj client.Object, statusOf func(client.Object) any) (bool, error) {
	return patch(ctx, c, before, obj, statusOf, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// PatchDerived is Patch without the lock, for a status derived wholly from what the
// reconcile observed (an AppService's, a CloudManager's): a status computed from a cached
// object a moment old is still what was observed, and the reconcile that the newer change
// triggers writes the newer one. A lock would only turn each such moment into a failed
// write, a retry and a delay (measured in tests/bench: 27 of 361 reconciles of 30
// AppServices).
func PatchDerived(ctx context.Context, c client.Client, before, obj client.Object, statusOf func(client.Object) any) (bool, error) {
	return patch(ctx, c, before, obj, statusOf, client.MergeFrom(before))
}

func patch(ctx context.Context, c client.Client, before, obj client.Object, statusOf func(client.Object) any, p client.Patch) (bool, error) {
	if equality.Semantic.DeepEqual(statusOf(before), statusOf(obj)) {
		return false, nil
	}
	version := before.GetResourceVersion()
	if err := c.Status().Patch(ctx, obj, p); err != nil {
		return false, fmt.Errorf("while writing the status of %s: %w", obj.GetName(), err)
	}
	// A status that differs only below what the API keeps (a time's nanoseconds, which
	// metav1.Time drops) is the same object to the API server: it keeps the resource
	// version, and nothing was written. Said as written, a StaleGuard would hold every later
	// look off that version, which no newer one ever replaces (a RedisCluster's status
	// stood still for minutes that way).
	return obj.GetResourceVersion() != version, nil
}

// Set sets a condition stamped with generation. lastTransitionTime changes only when the
// condition's status does.
func Set(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}
