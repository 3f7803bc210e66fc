package redis

import (
	"cmp"
	"context"

	"github.com/middleware-operator/middleware-operator/internal/archiver"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// syncArchive is the reconcile's archive stage (archiver.Stage.Sync): it starts, keeps or
// stops the cluster's followers as spec.archive says and writes the archive's status.
func (r *RedisClusterReconciler) syncArchive(ctx context.Context, s *state) {
	stage := archiver.Stage{Registry: &r.archives, Recorder: r.Recorder,
		Stores: backupstore.Opener{Reader: r.APIReader, Policy: r.StorePolicy}, Fence: r.ArchiveFence}
	look := archiver.Look{Cluster: s.rc, Next: s.next, Snap: s.snap, Conn: archiver.Conn{Login: s.login(), TLS: s.certs.Config}}
	if s.step.Kind == plan.StepRecover {
		look.Repairing = cmp.Or(s.step.Reason, "a topology repair")
	}
	stage.Sync(ctx, look)
}
