package redis

import (
	"context"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/loading"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// loader loads backups into the cluster's masters (loading.Loader): over the reconciler's
// background loads and its memories of sources and failures.
func (r *RedisClusterReconciler) loader() *loading.Loader {
	return &loading.Loader{Opener: restore.Opener{Objects: r.Client, Secrets: r.APIReader, Policy: r.StorePolicy}, Recorder: r.Recorder,
		Loads: r.backgroundLoads(), Sources: &r.sources, Failures: &r.storeFailures, MaxRecord: r.RestoreMaxRecord, Fence: r.fence}
}

// loadTarget is the cluster the reconcile loads into.
func (s *state) loadTarget() loading.Target {
	return loading.Target{Cluster: s.rc, Next: s.next, Login: s.login(), TLS: s.certs.Config}
}

// readRestore reads the backup a restoring cluster loads (loading.Loader.ReadRestore).
func (r *RedisClusterReconciler) readRestore(ctx context.Context, s *state) error {
	var err error
	s.restore, err = r.loader().ReadRestore(ctx, s.rc)
	return err
}

// readReload reads the backup of a reload under way (loading.Loader.ReadReload).
func (r *RedisClusterReconciler) readReload(ctx context.Context, s *state) error {
	src, err := r.loader().ReadReload(ctx, s.rc)
	if err != nil {
		return err
	}
	s.reload = src
	return nil
}

// restoreShard carries out StepRestoreShard; a load still running wakes the cluster when it
// ends.
func (r *RedisClusterReconciler) restoreShard(s *state) error {
	pending, err := r.loader().RestoreShards(s.loadTarget(), s.restore, s.step)
	s.loadsPending = s.loadsPending || pending
	return err
}

// recordReload carries out StepRecordReload.
func (r *RedisClusterReconciler) recordReload(s *state) {
	r.loader().RecordReload(s.loadTarget(), s.step)
}

// reloadShard carries out StepReloadShard.
func (r *RedisClusterReconciler) reloadShard(s *state) error {
	pending, err := r.loader().ReloadShard(s.loadTarget(), s.reload, s.step)
	s.loadsPending = s.loadsPending || pending
	return err
}

// finishReload carries out StepFinishReload: the reload annotation removed, then the
// reload's end recorded.
func (r *RedisClusterReconciler) finishReload(ctx context.Context, s *state) error {
	if err := r.removeAnnotation(ctx, s, loading.RestoreLostShardsAnnotation); err != nil {
		return err
	}
	r.loader().FinishReload(s.loadTarget(), s.reload)
	return nil
}

// abandonReload carries out StepAbandonReload: the reload annotation removed, then the
// reload given up; the accept-data-loss annotation is spent at the next look
// (planDropAcceptance).
func (r *RedisClusterReconciler) abandonReload(ctx context.Context, s *state) error {
	if err := r.removeAnnotation(ctx, s, loading.RestoreLostShardsAnnotation); err != nil {
		return err
	}
	r.loader().AbandonReload(s.loadTarget(), s.step.Reason)
	return nil
}
