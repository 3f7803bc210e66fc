package redis

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// RestoreLostShardsAnnotation, set on a RedisCluster to the name of a Completed RedisBackup
// of it, makes the operator reload the keys of shards that lost every copy from that backup
// instead of leaving their slots unserved: the lost slots are given up (as with the
// accept-data-loss annotation), served again by a live master, and the backup's keys in
// them are loaded there while the rest of the cluster serves. The operator removes it once
// the reload is done.
const RestoreLostShardsAnnotation = "redis.middleware-operator.io/restore-lost-shards-from"

// readReload reads the backup of a reload under way (status.reload).
func (r *RedisClusterReconciler) readReload(ctx context.Context, s *state) error {
	st := s.rc.Status.Reload
	if st == nil {
		return nil
	}
	src, err := r.readSource(s, "reload from "+st.Backup, func() (*restore.Source, error) {
		if st.Backup == plan.ReloadFromArchive {
			return r.openReloadArchive(ctx, s.rc, st), nil
		}
		return r.opener().Backup(ctx, s.rc, st.Backup)
	})
	if err != nil {
		return err
	}
	if m := src.Manifest; m != nil && src.Archive == nil && (m.Cluster.Name != s.rc.Name || m.Cluster.Namespace != s.rc.Namespace) {
		src.Problem = fmt.Sprintf("RedisBackup %s is a backup of %s/%s, not of this cluster: name a backup of %s in %s",
			st.Backup, m.Cluster.Namespace, m.Cluster.Name, s.rc.Name, RestoreLostShardsAnnotation)
	}
	s.reload = src
	return nil
}

// openReloadArchive reads the cluster's own archive (spec.archive) for a reload of the lost
// slots status.reload records: the timelines that served when the lost masters were last
// heard from (LostAt; without it, when the loss was recorded), replayed up to the record
// (StartedAt, in whole seconds, so a second more), each kept to the lost slots of its shard.
// Choosing by the record's time instead took a timeline the archive had begun, between the
// loss and the record, from the lost master's pod back empty: an empty base.
func (r *RedisClusterReconciler) openReloadArchive(ctx context.Context, rc *redisv1alpha1.RedisCluster, st *redisv1alpha1.ShardReloadStatus) *restore.Source {
	if rc.Spec.Archive == nil || st.StartedAt == nil {
		return &restore.Source{Problem: fmt.Sprintf("%s is %s but the cluster has no spec.archive: name a Completed RedisBackup of it instead",
			RestoreLostShardsAnnotation, plan.ReloadFromArchive)}
	}
	target := st.StartedAt.Add(time.Second)
	var lostAt time.Time
	if st.LostAt != nil {
		lostAt = st.LostAt.Time
	}
	return r.opener().ArchiveAt(ctx, rc, "spec.archive.destination.endpoint", rc.Spec.Archive.Destination, rc.Name, lostAt, target, target.UTC().Format(time.RFC3339), true)
}

// plannerReload is the reload under way in the planner's terms, nil when there is none.
func plannerReload(s *state) *plan.Reload {
	st := s.rc.Status.Reload
	if st == nil || s.reload == nil {
		return nil
	}
	slots, err := nodes.ParseSlotRanges(st.Slots)
	out := &plan.Reload{Source: st.Backup, Slots: slots, Shards: s.reload.ShardSlots(), Problem: s.reload.Problem}
	if err != nil {
		out.Problem = fmt.Sprintf("status.reload.slots %q: %v", st.Slots, err)
	}
	for _, i := range st.LoadedShards {
		out.Loaded = append(out.Loaded, int(i))
	}
	return out
}

// recordReload records the lost slots to reload, before they are given up.
func (r *RedisClusterReconciler) recordReload(s *state) {
	now := metav1.Now()
	backup := s.rc.Annotations[RestoreLostShardsAnnotation]
	s.next.Status.Reload = &redisv1alpha1.ShardReloadStatus{Backup: backup, Slots: nodes.FormatSlotRanges(s.step.Slots), StartedAt: &now}
	if !s.step.LostAt.IsZero() {
		s.next.Status.Reload.LostAt = &metav1.Time{Time: s.step.LostAt}
	}
	r.event(s, corev1.EventTypeWarning, report.ReasonReloadingLostSlots, "Heal", "slots %s have no copy left: they are given up, served again empty, then reloaded from %s",
		s.next.Status.Reload.Slots, reloadSourceName(backup))
}

// reloadShard loads the backup's keys in the lost slots of the step's shard.
func (r *RedisClusterReconciler) reloadShard(s *state) error {
	step := s.step
	load := plan.ShardLoad{Shard: step.Shard, Slots: step.Slots, Addr: step.Addr, NodeID: step.NodeID, Pod: step.Pod}
	mayHaveRun := false
	loads := r.backgroundLoads()
	if s.reload.Archive != nil && !loads.Known(restore.KeyOf(client.ObjectKeyFromObject(s.rc), load)) {
		var begin bool
		begin, mayHaveRun = reloadLoadGate(s.rc.Status.Reload, int32(step.Shard), loads.Run()) //nolint:gosec // a shard index
		if !begin {
			st := s.next.Status.Reload
			st.StartedLoads = append(st.StartedLoads, redisv1alpha1.ShardLoadStart{Shard: int32(step.Shard), Run: loads.Run()}) //nolint:gosec // a shard index
			s.loadsPending = true
			return nil
		}
	}
	res, ended, err := r.runLoad(s, s.reload, load, mayHaveRun, false, report.ReasonRestoreFailed, "Heal")
	if !ended || err != nil {
		return err
	}
	st := s.next.Status.Reload
	if !slices.Contains(st.LoadedShards, int32(s.step.Shard)) { //nolint:gosec // a shard index
		st.LoadedShards = append(st.LoadedShards, int32(s.step.Shard)) //nolint:gosec // a shard index
	}
	sh := s.reload.Manifest.Shards[s.step.Shard]
	if a := s.reload.Archive; a != nil {
		tl := a.Timelines[s.step.Shard]
		replayed := res.Replay
		reached := "its base"
		if !replayed.Reached.IsZero() {
			reached = replayed.Reached.UTC().Format(time.RFC3339Nano)
		}
		r.event(s, corev1.EventTypeNormal, report.ReasonRestoreShardLoaded, "Heal",
			"reloaded slots %s from the archive's %s timeline %d: %d keys of its base (captured at %s) and %d archived commands of those slots, up to %s, into %s",
			nodes.FormatSlotRanges(step.Slots), tl.Shard, tl.Timeline, res.Restored, sh.CapturedAt.Format(time.RFC3339), replayed.Commands, reached, step.Pod)
		return nil
	}
	r.event(s, corev1.EventTypeNormal, report.ReasonRestoreShardLoaded, "Heal", "reloaded %d keys of slots %s from RedisBackup %s (%s, captured at %s) into %s",
		res.Restored, nodes.FormatSlotRanges(s.step.Slots), st.Backup, nodes.ShardName(s.step.Shard), sh.CapturedAt.Format(time.RFC3339), s.step.Pod)
	return nil
}

// reloadSourceName names what a reload reads, for events: a RedisBackup, or the archive.
func reloadSourceName(value string) string {
	if value == plan.ReloadFromArchive {
		return "the archive (spec.archive), up to the loss"
	}
	return "RedisBackup " + value
}

// finishReload ends the reload: the status forgets it and the annotation is removed.
func (r *RedisClusterReconciler) finishReload(ctx context.Context, s *state) error {
	st := s.rc.Status.Reload
	if err := r.endReload(ctx, s); err != nil {
		return err
	}
	if s.reload.Archive != nil {
		r.event(s, corev1.EventTypeNormal, report.ReasonLostSlotsReloaded, "Heal", "the lost slots %s are served again with the keys of %s", st.Slots, reloadSourceName(st.Backup))
		return nil
	}
	r.event(s, corev1.EventTypeNormal, report.ReasonLostSlotsReloaded, "Heal", "the lost slots %s are served again with the keys of RedisBackup %s (as of %s)",
		st.Slots, st.Backup, s.reload.Manifest.CompletedAt.Format(time.RFC3339))
	return nil
}

// abandonReload gives up the reload under way (the user accepted the loss): a load of it
// still running is cancelled, the status forgets it and the reload annotation is removed;
// the accept-data-loss annotation is spent at the next look (planDropAcceptance).
func (r *RedisClusterReconciler) abandonReload(ctx context.Context, s *state) error {
	if err := r.endReload(ctx, s); err != nil {
		return err
	}
	r.backgroundLoads().Forget(client.ObjectKeyFromObject(s.rc))
	r.event(s, corev1.EventTypeWarning, report.ReasonReloadAbandoned, "Heal", "%s", s.step.Reason)
	return nil
}

// endReload is what ending a reload, done or given up, takes: the reload annotation
// removed, status.reload forgotten, and the source read for it dropped.
func (r *RedisClusterReconciler) endReload(ctx context.Context, s *state) error {
	st := s.rc.Status.Reload
	if err := r.removeAnnotation(ctx, s, RestoreLostShardsAnnotation); err != nil {
		return err
	}
	s.next.Status.Reload = nil
	r.sources.Drop(backupstore.FailureKey{Object: client.ObjectKeyFromObject(s.rc), What: "reload from " + st.Backup})
	return nil
}

// reloadLoadGate decides whether the load of shard from the archive may begin now and
// whether it is a retry. A replay is not idempotent (an INCR, an RPUSH), so a load another
// operator run may have begun, and left half done when it ended, must empty the slots
// before it replays again; the first load does not (clients' new keys in the slots stay).
// To tell them apart the record that a load begins, with this run's name, is written to
// status.reload.startedLoads before it begins: begin is false until the status read shows
// it (the caller records it and looks again), and mayHaveRun is true when the record
// names another run.
func reloadLoadGate(st *redisv1alpha1.ShardReloadStatus, shard int32, run string) (begin, mayHaveRun bool) {
	if st == nil {
		return false, false
	}
	for _, l := range st.StartedLoads {
		if l.Shard == shard {
			return true, l.Run != run
		}
	}
	return false, false
}
