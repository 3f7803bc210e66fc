package redis

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// PVCFinalizer makes the operator delete a cluster's PersistentVolumeClaims with it; it is
// present only when spec.finalizers is "foreground" (the seed's setting). Without it the
// claims, and the data, outlive the RedisCluster.
const PVCFinalizer = "redis.middleware-operator.io/delete-pvcs"

// ensureFinalizer adds or removes PVCFinalizer to match spec.finalizers. done means it
// wrote the object and the reconcile ends (the write triggers the next one).
func (r *RedisClusterReconciler) ensureFinalizer(ctx context.Context, rc *redisv1alpha1.RedisCluster) (bool, error) {
	want := rc.Spec.Finalizers == "foreground"
	if want == controllerutil.ContainsFinalizer(rc, PVCFinalizer) {
		return false, nil
	}
	patched := rc.DeepCopy()
	if want {
		controllerutil.AddFinalizer(patched, PVCFinalizer)
	} else {
		controllerutil.RemoveFinalizer(patched, PVCFinalizer)
	}
	if err := r.Patch(ctx, patched, client.MergeFromWithOptions(rc, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("while updating the finalizers of %s: %w", rc.Name, err)
	}
	return true, nil
}

// finalize deletes the cluster's claims when PVCFinalizer is present, then removes it. The
// garbage collector deletes every other object through the owner references.
func (r *RedisClusterReconciler) finalize(ctx context.Context, rc *redisv1alpha1.RedisCluster) error {
	if !controllerutil.ContainsFinalizer(rc, PVCFinalizer) {
		return nil
	}
	if err := r.deleteClaims(ctx, rc, 0); err != nil {
		return fmt.Errorf("while deleting the PersistentVolumeClaims of %s: %w", rc.Name, err)
	}
	patched := rc.DeepCopy()
	controllerutil.RemoveFinalizer(patched, PVCFinalizer)
	if err := r.Patch(ctx, patched, client.MergeFrom(rc)); err != nil {
		return fmt.Errorf("while removing the finalizer of %s: %w", rc.Name, err)
	}
	r.Recorder.Eventf(rc, nil, corev1.EventTypeNormal, "PVCsDeleted", "Delete", "deleted the PersistentVolumeClaims (spec.finalizers is foreground)")
	return nil
}
