package redis

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/loading"
)

// AcceptDataLossAnnotation, set to "true" on a RedisCluster whose every node came back
// without its data, lets the operator form a new, empty cluster in its place. The operator
// removes it once the new cluster is formed.
const AcceptDataLossAnnotation = "redis.middleware-operator.io/accept-data-loss"

// dropAcceptance removes AcceptDataLossAnnotation once a cluster is formed again, so it
// cannot accept a later loss unseen.
func (r *RedisClusterReconciler) dropAcceptance(ctx context.Context, s *state) error {
	return r.removeAnnotation(ctx, s, AcceptDataLossAnnotation)
}

// removeAnnotation removes the annotation key from the cluster, when there, and carries the
// written object's resourceVersion and annotations into the reconcile's copies: the status
// patch that ends the reconcile is based on s.rc, whose old version would now conflict and
// leave the status (and with it the step just done) to be done and reported again. The
// version replaced is recorded with the stale guard, so a cache that still shows it (the
// annotation there) is not reconciled.
func (r *RedisClusterReconciler) removeAnnotation(ctx context.Context, s *state, key string) error {
	if _, ok := s.rc.Annotations[key]; !ok {
		return nil
	}
	patched := s.rc.DeepCopy()
	delete(patched.Annotations, key)
	if err := r.Patch(ctx, patched, client.MergeFrom(s.rc)); err != nil {
		return fmt.Errorf("while removing the annotation %s: %w", key, err)
	}
	r.stale.Wrote(client.ObjectKeyFromObject(s.rc), s.rc.ResourceVersion)
	for _, o := range []*redisv1alpha1.RedisCluster{s.rc, s.next} {
		o.ResourceVersion, o.Annotations = patched.ResourceVersion, patched.Annotations
	}
	return nil
}

// lossAcceptedBy says what gave lost slots up, for the DataLossAccepted event: the
// accept-data-loss annotation, or a reload from the backup reloading names (status.reload's,
// else loading.RestoreLostShardsAnnotation's). It is pure.
func lossAcceptedBy(annotations map[string]string, reloading string) string {
	if reloading == "" {
		reloading = annotations[loading.RestoreLostShardsAnnotation]
	}
	if annotations[AcceptDataLossAnnotation] == "true" || reloading == "" {
		return AcceptDataLossAnnotation + " is set"
	}
	return fmt.Sprintf("%s names %s: the lost slots are given up, served again empty, then their keys reloaded from it",
		loading.RestoreLostShardsAnnotation, loading.SourceName(reloading))
}
