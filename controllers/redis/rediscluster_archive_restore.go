package redis

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// TargetLatest is the spec.restore.archive.targetTime that restores everything archived.
const TargetLatest = "latest"

// archiveRestore is what a restore from an archive replays: for each shard of the
// restore's manifest (in its order), the timeline whose base it loads. For a reload of
// lost slots (reload), each replay is kept to the slots it reloads.
type archiveRestore struct {
	cluster    string
	target     time.Time // zero: the latest
	targetText string
	timelines  []redisarchive.Timeline
	reload     bool
}

// parseTarget reads spec.restore.archive.targetTime: zero for latest.
func parseTarget(text string) (time.Time, error) {
	if text == TargetLatest {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return t, fmt.Errorf("spec.restore.archive.targetTime %q is not an RFC 3339 time (%w): write it as 2026-11-28T23:15:00Z, or latest", text, err)
	}
	return t, nil
}

// openArchive reads the archive spec names: its bases, the timeline of each shard for the
// target, and makes of them the manifest the restore loads (the bases' snapshots are its
// shards' files).
func (r *RedisClusterReconciler) openArchive(ctx context.Context, rc *redisv1alpha1.RedisCluster, spec *redisv1alpha1.ArchiveRestoreSpec) *restoreSource {
	target, err := parseTarget(spec.TargetTime)
	if err != nil {
		return &restoreSource{problem: err.Error()}
	}
	return r.openArchiveAt(ctx, rc, "spec.restore.archive.source.endpoint", spec.Source, spec.Cluster, time.Time{}, target, spec.TargetTime, false)
}

// openReloadArchive reads the cluster's own archive (spec.archive) for a reload of the lost
// slots status.reload records: the timelines that served when the lost masters were last
// heard from (LostAt; without it, when the loss was recorded), replayed up to the record
// (StartedAt, in whole seconds, so a second more), each kept to the lost slots of its shard.
// Choosing by the record's time instead took a timeline the archive had begun, between the
// loss and the record, from the lost master's pod back empty: an empty base.
func (r *RedisClusterReconciler) openReloadArchive(ctx context.Context, rc *redisv1alpha1.RedisCluster, st *redisv1alpha1.ShardReloadStatus) *restoreSource {
	if rc.Spec.Archive == nil || st.StartedAt == nil {
		return &restoreSource{problem: fmt.Sprintf("%s is %s but the cluster has no spec.archive: name a Completed RedisBackup of it instead",
			RestoreLostShardsAnnotation, plan.ReloadFromArchive)}
	}
	target := st.StartedAt.Add(time.Second)
	var lostAt time.Time
	if st.LostAt != nil {
		lostAt = st.LostAt.Time
	}
	return r.openArchiveAt(ctx, rc, "spec.archive.destination.endpoint", rc.Spec.Archive.Destination, rc.Name, lostAt, target, target.UTC().Format(time.RFC3339), true)
}

// openArchiveAt reads the archive of cluster at source for target (zero: the latest): its
// bases, the timeline of each shard, and makes of them the manifest the load reads (the
// bases' snapshots are its shards' files); each is replayed up to target. For a reload, the
// timelines are those that served at lostAt (redisarchive.ChooseReloadTimelines), and one
// that ended before target is what there is (the lost shard's archive ends at the loss), so
// coverage is not checked.
func (r *RedisClusterReconciler) openArchiveAt(ctx context.Context, rc *redisv1alpha1.RedisCluster, field string, source redisv1alpha1.ObjectStore, cluster string,
	lostAt, target time.Time, targetText string, reload bool) *restoreSource {
	spec := &redisv1alpha1.ArchiveRestoreSpec{Source: source, Cluster: cluster, TargetTime: targetText}
	dir := archiveFolder(rc.Namespace, spec.Source)
	src := &restoreSource{location: backupstore.Location(spec.Source, path.Join(dir, spec.Cluster, "archive"))}
	var err error
	if src.store, err = (backupstore.Opener{Reader: r.APIReader, Policy: r.StorePolicy}).Open(ctx, field, rc.Namespace, spec.Source, dir); err != nil {
		src.problem = err.Error()
		src.refused = errors.Is(err, backupstore.ErrEndpointRefused)
		return src
	}
	all, err := redisarchive.BaseTimelines(ctx, redisarchive.StoreSink{Client: src.store}, spec.Cluster)
	if err != nil {
		log.FromContext(ctx).Info("cannot read the archive", "location", src.location, "error", objectstore.Detail(err))
		src.problem, src.storeFailed = fmt.Sprintf("cannot read the archive at %s: %v", src.location, err), true
		return src
	}
	var chosen []redisarchive.Timeline
	if reload {
		chosen, err = redisarchive.ChooseReloadTimelines(all, lostAt, target)
	} else {
		chosen, err = redisarchive.ChooseTimelines(all, target)
	}
	if err != nil {
		src.problem, src.storeFailed = fmt.Sprintf("the archive at %s: %v", src.location, err), true
		return src
	}
	if !reload {
		if problem, err := uncoveredTarget(ctx, redisarchive.StoreSink{Client: src.store}, spec.Cluster, chosen, target); err != nil || problem != "" {
			if err != nil {
				problem = fmt.Sprintf("cannot read the archive at %s: %v", src.location, err)
			}
			src.problem, src.storeFailed = problem, true
			return src
		}
	}
	slices.SortFunc(chosen, func(a, b redisarchive.Timeline) int { return a.Base.Slots[0].Start - b.Base.Slots[0].Start })
	m := &backup.Manifest{Kind: backup.Kind, FormatVersion: backup.FormatVersion, Cluster: backup.ClusterRef{Namespace: dir, Name: spec.Cluster}}
	for _, tl := range chosen {
		m.Shards = append(m.Shards, tl.Base)
		if m.StartedAt.IsZero() || tl.Base.CapturedAt.Before(m.StartedAt) {
			m.StartedAt = tl.Base.CapturedAt
		}
		m.CompletedAt = maxTime(m.CompletedAt, tl.Base.CapturedAt)
	}
	if err := m.Validate(); err != nil {
		// Each shard whose slots changed started a timeline of its own from a base of its
		// own; at a time between a migration and those bases, the timelines that serve it
		// hold the slots of different moments.
		src.problem, src.storeFailed = fmt.Sprintf("the archive's bases at %s that serve %s do not make a whole cluster (%s): %s",
			src.location, spec.TargetTime, strings.ReplaceAll(err.Error(), "\n", "; "), migrationInWindow), true
		return src
	}
	src.manifest = m
	src.archive = &archiveRestore{cluster: spec.Cluster, target: target, targetText: spec.TargetTime, timelines: chosen, reload: reload}
	if reads, needs := resources.RedisRDBVersion(rc), m.RDBVersion(); reads > 0 && needs > reads {
		src.problem = fmt.Sprintf("the archive's bases are RDB version %d, which the Redis of spec.version %s cannot read: restore into the same Redis version or a later one",
			needs, rc.Spec.Version)
	}
	return src
}

// uncoveredTarget says, before anything is loaded, why the chosen timelines cannot restore
// target exactly ("" when they can): a shard whose timeline's archive ends before target
// while its next timeline serves only from after it (redisarchive.Timeline.Uncovered, which
// the replay checks again).
func uncoveredTarget(ctx context.Context, sink redisarchive.StoreSink, cluster string, chosen []redisarchive.Timeline, target time.Time) (string, error) {
	var problems []string
	for _, tl := range chosen {
		if !tl.MayNotCover(target) {
			continue
		}
		last, err := redisarchive.LastWrite(ctx, sink, cluster, tl.Shard, tl.Timeline)
		if err != nil {
			return "", err
		}
		if last.After(target) {
			continue // the timeline went on past the target
		}
		if err := tl.Uncovered(target, redisarchive.ReplayResult{Reached: last, Complete: true}); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) == 0 {
		return "", nil
	}
	return "the archive cannot restore " + target.UTC().Format(time.RFC3339Nano) + ": " + strings.Join(problems, "; "), nil
}

// slotSet reports whether a slot is in ranges.
func slotSet(ranges []nodes.SlotRange) func(int) bool {
	return func(slot int) bool {
		return slices.ContainsFunc(ranges, func(rg nodes.SlotRange) bool { return rg.Start <= slot && slot <= rg.End })
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// migrationInWindow is the cause and the fix a restore from an archive names when slots
// migrated between shards inside its window: the archive replays a shard's history onto the
// slots of its base, and a migration's DELs in one shard and RESTOREs in another cannot be
// ordered against each other.
const migrationInWindow = "slots migrated inside the restore window, which a restore cannot replay; restore to a time before the migration, " +
	"or to one after the timelines that started with the new slot map serve (the source's status.archive.shards[].baseCapturedAt), or to latest"

// replayShard replays the archive of the step's shard onto node, which holds its base,
// up to the restore's target, and keeps what it reached for the status.
func (r *RedisClusterReconciler) replayShard(ctx context.Context, rc *redisv1alpha1.RedisCluster, node rdbstream.Options, src *restoreSource, step plan.ShardLoad) error {
	tl := src.archive.timelines[step.Shard]
	opts := redisarchive.ReplayOptions{Target: node, Cluster: src.archive.cluster, Shard: tl.Shard, Timeline: tl.Timeline, From: tl.Base.ReplicationOffset, Until: src.archive.target}
	if src.archive.reload {
		opts.Only = slotSet(step.Slots) // the reloading master serves other slots too
	}
	res, err := redisarchive.Replay(ctx, redisarchive.StoreSink{Client: src.store}, opts)
	var foreign *redisarchive.ForeignSlotError
	if errors.As(err, &foreign) {
		return fmt.Errorf("the archive of %s timeline %d writes slot %d (the command ending at offset %d), outside the slots of its base (%s): %s",
			tl.Shard, tl.Timeline, foreign.Slot, foreign.Offset, nodes.FormatSlotRanges(backupstore.Ranges(tl.Base.Slots)), migrationInWindow)
	}
	if err != nil {
		return fmt.Errorf("while replaying the archive of %s timeline %d onto %s: %w", tl.Shard, tl.Timeline, step.Pod, err)
	}
	if err := tl.Uncovered(src.archive.target, res); err != nil && !src.archive.reload {
		return fmt.Errorf("the archive cannot restore %s: %w", src.archive.targetText, err)
	}
	r.replays.keep(keyOf(rc, step), res)
	return nil
}

// recordReplay records in the restore's status how far the loaded shard was replayed, with
// an event.
func (r *RedisClusterReconciler) recordReplay(s *state, src *restoreSource, load plan.ShardLoad) {
	tl := src.archive.timelines[load.Shard]
	res := r.replays.take(keyOf(s.rc, load))
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
	r.event(s, corev1.EventTypeNormal, ReasonRestoreShardLoaded, "Restore", "loaded %s (slots %s) from its base of timeline %d and %d archived commands, up to %s, into %s",
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

// archiveReplays keeps what each shard's replay reached, from the background load that
// ran it to the reconcile that collects the load's end.
type archiveReplays struct {
	mu sync.Mutex
	m  map[loadKey]redisarchive.ReplayResult
}

// keep keeps res for k.
func (a *archiveReplays) keep(k loadKey, res redisarchive.ReplayResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[loadKey]redisarchive.ReplayResult{}
	}
	a.m[k] = res
}

// take returns, and forgets, what k's replay reached (zero when nothing is kept).
func (a *archiveReplays) take(k loadKey) redisarchive.ReplayResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	res := a.m[k]
	delete(a.m, k)
	return res
}

// forget drops what is kept of cluster's replays.
func (a *archiveReplays) forget(cluster types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.m {
		if k.cluster == cluster {
			delete(a.m, k)
		}
	}
}
