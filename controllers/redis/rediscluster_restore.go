package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// restoreShardTimeout bounds the load of one shard (its check and its load), which runs in
// the background (restore.Loads): a step only starts it or collects its end.
const restoreShardTimeout = 30 * time.Minute

// readRestore reads, while the restore is not done, the backup spec.restore names: the
// RedisBackup (which must be Completed) or the source folder, then its manifest, and checks
// that the spec's Redis reads its files. What keeps it from going on is the problem, which
// the planner reports instead of forming the cluster.
func (r *RedisClusterReconciler) readRestore(ctx context.Context, s *state) error {
	if !resources.RedisRestoring(s.rc) {
		r.sources.Forget(client.ObjectKeyFromObject(s.rc))
		return nil
	}
	spec := s.rc.Spec.Restore
	src, err := r.readSource(s, "restore", func() (*restore.Source, error) {
		switch {
		case spec.Archive != nil:
			return r.opener().Archive(ctx, s.rc, spec.Archive), nil
		case spec.Backup != "":
			return r.opener().Backup(ctx, s.rc, spec.Backup)
		}
		return r.opener().Folder(ctx, s.rc, "spec.restore.source.endpoint", *spec.Source, spec.Source.Path), nil
	})
	s.restore = src
	return err
}

// plannerRestore is the restore in the planner's terms, nil when there is none to do.
func plannerRestore(s *state) *plan.Restore {
	if s.restore == nil {
		return nil
	}
	out := &plan.Restore{Problem: s.restore.Problem}
	if s.rc.Status.Restore != nil {
		out.Loaded = s.rc.Status.Restore.LoadedShards
	}
	out.Shards = s.restore.ShardSlots()
	return out
}

// restoreShard starts the step's shard loads, each into its master, all at once in the
// background (runLoad), and records in the status every master whose load ended, and the
// restore's end. A shard that fails is tried again after its back-off; the others stay
// loaded.
func (r *RedisClusterReconciler) restoreShard(s *state) error {
	src := s.restore
	report.InitRestoreStatus(s.next, s.restore)
	st := s.next.Status.Restore
	var errs []error
	for _, load := range s.step.Loads {
		res, ended, err := r.runLoad(s, src, load, false, true, report.ReasonRestoreFailed, "Restore")
		switch {
		case err != nil:
			errs = append(errs, err)
			continue
		case !ended:
			continue
		}
		st.LoadedShards = append(st.LoadedShards, load.NodeID)
		st.Keys += res.Restored
		if src.Archive != nil {
			r.recordReplay(s, src, load, res.Replay)
			continue
		}
		r.event(s, corev1.EventTypeNormal, report.ReasonRestoreShardLoaded, "Restore", "loaded %s of %d (slots %s, %d keys, captured at %s) into %s",
			nodes.ShardName(load.Shard), len(src.Manifest.Shards), nodes.FormatSlotRanges(load.Slots), res.Restored,
			src.Manifest.Shards[load.Shard].CapturedAt.Format(time.RFC3339), load.Pod)
	}
	if len(st.LoadedShards) == len(src.Manifest.Shards) {
		now := metav1.Now()
		st.CompletedAt = &now
		if src.Archive != nil {
			r.event(s, corev1.EventTypeNormal, report.ReasonRestoreCompleted, "Restore", "restored %d keys in %d shards from the archive %s to %s: %s",
				st.Keys, len(st.LoadedShards), src.Location, st.Target, archiveReached(st.ArchiveShards))
			return errors.Join(errs...)
		}
		r.event(s, corev1.EventTypeNormal, report.ReasonRestoreCompleted, "Restore", "restored %d keys in %d shards from %s (backup completed at %s)",
			st.Keys, len(st.LoadedShards), src.Location, src.Manifest.CompletedAt.Format(time.RFC3339))
	}
	return errors.Join(errs...)
}

// recordReplay records in the restore's status how far the loaded shard was replayed, with
// an event.
func (r *RedisClusterReconciler) recordReplay(s *state, src *restore.Source, load plan.ShardLoad, res redisarchive.ReplayResult) {
	tl := src.Archive.Timelines[load.Shard]
	shard := redisv1alpha1.RestoreArchiveShard{Shard: tl.Shard, Timeline: int32(tl.Timeline), Offset: max(res.Offset, tl.Base.ReplicationOffset), //nolint:gosec // timelines are few
		Commands: int64(res.Commands)}
	reached := "its base"
	if !res.Reached.IsZero() {
		t := metav1.NewMicroTime(res.Reached)
		shard.Reached = &t
		reached = res.Reached.UTC().Format(time.RFC3339Nano)
	}
	st := s.next.Status.Restore
	st.ArchiveShards = append(st.ArchiveShards, shard)
	r.event(s, corev1.EventTypeNormal, report.ReasonRestoreShardLoaded, "Restore", "loaded %s (slots %s) from its base of timeline %d and %d archived commands, up to %s, into %s",
		tl.Shard, nodes.FormatSlotRanges(load.Slots), tl.Timeline, res.Commands, reached, load.Pod)
}

// archiveReached says how far each shard of a restore from an archive got.
func archiveReached(shards []redisv1alpha1.RestoreArchiveShard) string {
	parts := make([]string, len(shards))
	for i, sh := range shards {
		reached := "its base"
		if sh.Reached != nil {
			reached = sh.Reached.UTC().Format(time.RFC3339Nano)
		}
		parts[i] = fmt.Sprintf("%s up to %s (%d commands)", sh.Shard, reached, sh.Commands)
	}
	return strings.Join(parts, ", ")
}

// opener reads the sources of restores and reloads: RedisBackups from the manager's cache,
// the stores' credentials through APIReader.
func (r *RedisClusterReconciler) opener() restore.Opener {
	return restore.Opener{Objects: r.Client, Secrets: r.APIReader, Policy: r.StorePolicy}
}

// readSource returns the source of what (a restore or a reload) of s's cluster kept from an
// earlier look, or reads it with read and keeps it: a source whose manifest was read until
// the cluster forgets it, one whose endpoint the operator refuses for good, one whose store read failed
// for its back-off. A problem is reported once in a Warning event.
func (r *RedisClusterReconciler) readSource(s *state, what string, read func() (*restore.Source, error)) (*restore.Source, error) {
	k := backupstore.FailureKey{Object: client.ObjectKeyFromObject(s.rc), What: what}
	if src := r.sources.Get(k); src != nil {
		return src, nil
	}
	src, err := read()
	if err != nil || src == nil {
		return src, err
	}
	switch {
	case src.Manifest != nil:
		r.storeFailures.Succeeded(k)
		r.sources.Keep(k, src, time.Time{})
	case src.Refused:
		if _, distinct := r.storeFailures.Fail(k, src.Problem, time.Now()); distinct {
			r.event(s, corev1.EventTypeWarning, backupstore.ReasonEndpointRefused, "Restore", "%s", src.Problem)
		}
		r.sources.Keep(k, src, time.Time{})
	case src.StoreFailed:
		wait, distinct := r.storeFailures.Fail(k, src.Problem, time.Now())
		if distinct {
			r.event(s, corev1.EventTypeWarning, report.ReasonRestoreFailed, "Restore", "%s; tried again in %s, then less and less often", src.Problem, wait)
		}
		r.sources.Keep(k, src, time.Now().Add(wait))
	}
	return src, nil
}
