package loading

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

// ReadReload reads the backup of the reload under way (status.reload), nil when there is
// none.
func (l *Loader) ReadReload(ctx context.Context, rc *redisv1alpha1.RedisCluster) (*restore.Source, error) {
	st := rc.Status.Reload
	if st == nil {
		return nil, nil
	}
	src, err := l.readSource(rc, "reload from "+st.Backup, func() (*restore.Source, error) {
		if st.Backup == plan.ReloadFromArchive {
			return l.openReloadArchive(ctx, rc, st), nil
		}
		return l.Opener.Backup(ctx, rc, st.Backup)
	})
	if err != nil {
		return nil, err
	}
	if m := src.Manifest; m != nil && src.Archive == nil && (m.Cluster.Name != rc.Name || m.Cluster.Namespace != rc.Namespace) {
		src.Problem = fmt.Sprintf("RedisBackup %s is a backup of %s/%s, not of this cluster: name a backup of %s in %s",
			st.Backup, m.Cluster.Namespace, m.Cluster.Name, rc.Name, RestoreLostShardsAnnotation)
	}
	return src, nil
}

// openReloadArchive reads the cluster's own archive (spec.archive) for a reload of the lost
// slots status.reload records: the timelines that served when the lost masters were last
// heard from (LostAt; without it, when the loss was recorded), replayed up to the record
// (StartedAt, in whole seconds, so a second more), each kept to the lost slots of its shard.
// Choosing by the record's time instead took a timeline the archive had begun, between the
// loss and the record, from the lost master's pod back empty: an empty base.
func (l *Loader) openReloadArchive(ctx context.Context, rc *redisv1alpha1.RedisCluster, st *redisv1alpha1.ShardReloadStatus) *restore.Source {
	if rc.Spec.Archive == nil || st.StartedAt == nil {
		return &restore.Source{Problem: fmt.Sprintf("%s is %s but the cluster has no spec.archive: name a Completed RedisBackup of it instead",
			RestoreLostShardsAnnotation, plan.ReloadFromArchive)}
	}
	target := st.StartedAt.Add(time.Second)
	var lostAt time.Time
	if st.LostAt != nil {
		lostAt = st.LostAt.Time
	}
	return l.Opener.ArchiveAt(ctx, rc, "spec.archive.destination.endpoint", rc.Spec.Archive.Destination, rc.Name, lostAt, target, target.UTC().Format(time.RFC3339), true)
}

// Reload is the reload under way of src in the planner's terms, nil when there is none.
func Reload(rc *redisv1alpha1.RedisCluster, src *restore.Source) *plan.Reload {
	st := rc.Status.Reload
	if st == nil || src == nil {
		return nil
	}
	slots, err := nodes.ParseSlotRanges(st.Slots)
	out := &plan.Reload{Source: st.Backup, Slots: slots, Shards: src.ShardSlots(), Problem: src.Problem}
	if err != nil {
		out.Problem = fmt.Sprintf("status.reload.slots %q: %v", st.Slots, err)
	}
	for _, i := range st.LoadedShards {
		out.Loaded = append(out.Loaded, int(i))
	}
	return out
}

// RecordReload carries out StepRecordReload: it records the lost slots to reload, before
// they are given up.
func (l *Loader) RecordReload(t Target, step plan.Step) {
	now := metav1.Now()
	backup := t.Cluster.Annotations[RestoreLostShardsAnnotation]
	t.Next.Status.Reload = &redisv1alpha1.ShardReloadStatus{Backup: backup, Slots: nodes.FormatSlotRanges(step.Slots), StartedAt: &now}
	if !step.LostAt.IsZero() {
		t.Next.Status.Reload.LostAt = &metav1.Time{Time: step.LostAt}
	}
	l.event(t, corev1.EventTypeWarning, report.ReasonReloadingLostSlots, "Heal", "slots %s have no copy left: they are given up, served again empty, then reloaded from %s",
		t.Next.Status.Reload.Slots, SourceName(backup))
}

// ReloadShard carries out StepReloadShard: it loads src's keys in the lost slots of the
// step's shard. pending says the load still runs (or waits for its start to be recorded).
func (l *Loader) ReloadShard(t Target, src *restore.Source, step plan.Step) (pending bool, _ error) {
	load := plan.ShardLoad{Shard: step.Shard, Slots: step.Slots, Addr: step.Addr, NodeID: step.NodeID, Pod: step.Pod}
	mayHaveRun := false
	if src.Archive != nil && !l.Loads.Known(restore.KeyOf(client.ObjectKeyFromObject(t.Cluster), load)) {
		var begin bool
		begin, mayHaveRun = loadGate(t.Cluster.Status.Reload, int32(step.Shard), l.Loads.Run()) //nolint:gosec // a shard index
		if !begin {
			st := t.Next.Status.Reload
			st.StartedLoads = append(st.StartedLoads, redisv1alpha1.ShardLoadStart{Shard: int32(step.Shard), Run: l.Loads.Run()}) //nolint:gosec // a shard index
			return true, nil
		}
	}
	res, ended, pending, err := l.runLoad(t, src, load, mayHaveRun, false, report.ReasonRestoreFailed, "Heal")
	if !ended || err != nil {
		return pending, err
	}
	st := t.Next.Status.Reload
	if !slices.Contains(st.LoadedShards, int32(step.Shard)) { //nolint:gosec // a shard index
		st.LoadedShards = append(st.LoadedShards, int32(step.Shard)) //nolint:gosec // a shard index
	}
	sh := src.Manifest.Shards[step.Shard]
	if a := src.Archive; a != nil {
		tl := a.Timelines[step.Shard]
		replayed := res.Replay
		reached := "its base"
		if !replayed.Reached.IsZero() {
			reached = replayed.Reached.UTC().Format(time.RFC3339Nano)
		}
		l.event(t, corev1.EventTypeNormal, report.ReasonRestoreShardLoaded, "Heal",
			"reloaded slots %s from the archive's %s timeline %d: %d keys of its base (captured at %s) and %d archived commands of those slots, up to %s, into %s",
			nodes.FormatSlotRanges(step.Slots), tl.Shard, tl.Timeline, res.Restored, sh.CapturedAt.Format(time.RFC3339), replayed.Commands, reached, step.Pod)
		return false, nil
	}
	l.event(t, corev1.EventTypeNormal, report.ReasonRestoreShardLoaded, "Heal", "reloaded %d keys of slots %s from RedisBackup %s (%s, captured at %s) into %s",
		res.Restored, nodes.FormatSlotRanges(step.Slots), st.Backup, nodes.ShardName(step.Shard), sh.CapturedAt.Format(time.RFC3339), step.Pod)
	return false, nil
}

// SourceName names what a reload reads, for messages: a RedisBackup, or the archive.
func SourceName(value string) string {
	if value == plan.ReloadFromArchive {
		return "the archive (spec.archive), up to the loss"
	}
	return "RedisBackup " + value
}

// FinishReload ends a reload whose every shard was loaded (StepFinishReload), once the
// caller removed the annotation: the status forgets it, the source read for it is dropped,
// and an event says the slots are served again.
func (l *Loader) FinishReload(t Target, src *restore.Source) {
	st := t.Cluster.Status.Reload
	l.end(t)
	if src.Archive != nil {
		l.event(t, corev1.EventTypeNormal, report.ReasonLostSlotsReloaded, "Heal", "the lost slots %s are served again with the keys of %s", st.Slots, SourceName(st.Backup))
		return
	}
	l.event(t, corev1.EventTypeNormal, report.ReasonLostSlotsReloaded, "Heal", "the lost slots %s are served again with the keys of RedisBackup %s (as of %s)",
		st.Slots, st.Backup, src.Manifest.CompletedAt.Format(time.RFC3339))
}

// AbandonReload gives up the reload under way (StepAbandonReload: the user accepted the
// loss, why says so), once the caller removed the annotation: a load of it still running
// is cancelled, the status forgets it and the source read for it is dropped.
func (l *Loader) AbandonReload(t Target, why string) {
	l.end(t)
	l.Loads.Forget(client.ObjectKeyFromObject(t.Cluster))
	l.event(t, corev1.EventTypeWarning, report.ReasonReloadAbandoned, "Heal", "%s", why)
}

// end is what ending a reload, done or given up, takes besides the annotation's removal:
// status.reload forgotten, and the source read for it dropped.
func (l *Loader) end(t Target) {
	st := t.Cluster.Status.Reload
	t.Next.Status.Reload = nil
	l.Sources.Drop(backupstore.FailureKey{Object: client.ObjectKeyFromObject(t.Cluster), What: "reload from " + st.Backup})
}

// loadGate decides whether the load of shard from the archive may begin now and whether it
// is a retry. A replay is not idempotent (an INCR, an RPUSH), so a load another operator
// run may have begun, and left half done when it ended, must empty the slots before it
// replays again; the first load does not (clients' new keys in the slots stay). To tell
// them apart the record that a load begins, with this run's name, is written to
// status.reload.startedLoads before it begins: begin is false until the status read shows
// it (the caller records it and looks again), and mayHaveRun is true when the record names
// another run.
func loadGate(st *redisv1alpha1.ShardReloadStatus, shard int32, run string) (begin, mayHaveRun bool) {
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
