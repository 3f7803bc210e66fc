// Package status writes a custom resource's status only when it changed, with optimistic
// locking, and sets conditions stamped with the generation they describe.
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
	if equality.Semantic.DeepEqual(statusOf(before), statusOf(obj)) {
		return false, nil
	}
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := c.Status().Patch(ctx, obj, patch); err != nil {
		return false, fmt.Errorf("while writing the status of %s: %w", obj.GetName(), err)
	}
	return true, nil
}

// Set sets a condition stamped with generation. lastTransitionTime changes only when the
// condition's status does.
func Set(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}
