package report

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// InitRestoreStatus starts next's restore status once its backup src is read (src nil: not
// read, or no restore).
func InitRestoreStatus(next *redisv1alpha1.RedisCluster, src *restore.Source) {
	if src == nil || src.Manifest == nil || next.Status.Restore != nil {
		return
	}
	completed := metav1.NewTime(src.Manifest.CompletedAt)
	next.Status.Restore = &redisv1alpha1.RestoreStatus{Location: src.Location, BackupCompletedAt: &completed,
		Shards: int32(len(src.Manifest.Shards))} //nolint:gosec // a manifest has at most 16384 shards
	if src.Archive != nil {
		next.Status.Restore.Target = src.Archive.TargetText
	}
}

// RestoreProgress says what the restore of next (its spec, and the status being built)
// still has to do, "" once it is done (or there is none).
func RestoreProgress(next *redisv1alpha1.RedisCluster) string {
	if next.Spec.Restore == nil {
		return ""
	}
	st := next.Status.Restore
	switch {
	case st != nil && st.CompletedAt != nil:
		return ""
	case st == nil && next.Spec.Restore.Archive != nil:
		return "restoring from the archive of " + next.Spec.Restore.Archive.Cluster + ": its bases are not read yet"
	case st == nil:
		return "restoring from a backup: its manifest is not read yet"
	}
	return fmt.Sprintf("restoring from %s: %d of %d shards loaded", st.Location, len(st.LoadedShards), st.Shards)
}
