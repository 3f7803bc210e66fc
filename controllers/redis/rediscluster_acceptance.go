package redis

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// AcceptDataLossAnnotation, set to "true" on a RedisCluster whose every node came back
// without its data, lets the operator form a new, empty cluster in its place. The operator
// removes it once the new cluster is formed.
const AcceptDataLossAnnotation = "redis.middleware-operator.io/accept-data-loss"

// dropAcceptance removes AcceptDataLossAnnotation once a cluster is formed again, so it
// cannot accept a later loss unseen.
func (r *RedisClusterReconciler) dropAcceptance(ctx context.Context, rc *redisv1alpha1.RedisCluster) error {
	if _, ok := rc.Annotations[AcceptDataLossAnnotation]; !ok {
		return nil
	}
	patched := rc.DeepCopy()
	delete(patched.Annotations, AcceptDataLossAnnotation)
	if err := r.Patch(ctx, patched, client.MergeFrom(rc)); err != nil {
		return fmt.Errorf("while removing the annotation %s: %w", AcceptDataLossAnnotation, err)
	}
	return nil
}
