package loading

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
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// ReadRestore reads, while rc's restore is not done, the backup spec.restore names: the
// RedisBackup (which must be Completed) or the source folder, or the archive, then its
// manifest, and checks that the spec's Redis reads its files (nil when there is no restore
// to do). What keeps it from going on is the source's Problem, which the planner reports
// instead of forming the cluster.
func (l *Loader) ReadRestore(ctx context.Context, rc *redisv1alpha1.RedisCluster) (*restore.Source, error) {
	if !resources.RedisRestoring(rc) {
		l.Sources.Forget(client.ObjectKeyFromObject(rc))
		return nil, nil
	}
	spec := rc.Spec.Restore
	return l.readSource(rc, "restore", func() (*restore.Source, error) {
		switch {
		case spec.Archive != nil:
			return l.Opener.Archive(ctx, rc, spec.Archive), nil
		case spec.Backup != "":
			return l.Opener.Backup(ctx, rc, spec.Backup)
		}
		return l.Opener.Folder(ctx, rc, "spec.restore.source.endpoint", *spec.Source, spec.Source.Path), nil
	})
}

// Restore is the restore of src in the planner's terms, nil when there is none to do.
func Restore(rc *redisv1alpha1.RedisCluster, src *restore.Source) *plan.Restore {
	if src == nil {
		return nil
	}
	out := &plan.Restore{Problem: src.Problem}
	if rc.Status.Restore != nil {
		out.Loaded = rc.Status.Restore.LoadedShards
	}
	out.Shards = src.ShardSlots()
	return out
}

// RestoreShards carries out StepRestoreShard: it starts the step's shard loads of src, each
// into its master, all at once in the background, and records in the status every master
// whose load ended, and the restore's end. A shard that fails is tried again after its
// back-off; the others stay loaded. pending says a load still runs.
func (l *Loader) RestoreShards(t Target, src *restore.Source, step plan.Step) (pending bool, _ error) {
	report.InitRestoreStatus(t.Next, src)
	st := t.Next.Status.Restore
	var errs []error
	for _, load := range step.Loads {
		res, ended, running, err := l.runLoad(t, src, load, false, true, report.ReasonRestoreFailed, "Restore")
		pending = pending || running
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
			l.recordReplay(t, src, load, res.Replay, aofNote(res))
			continue
		}
		l.event(t, corev1.EventTypeNormal, report.ReasonRestoreShardLoaded, "Restore", "loaded %s of %d (slots %s, %d keys, captured at %s) into %s%s",
			nodes.ShardName(load.Shard), len(src.Manifest.Shards), nodes.FormatSlotRanges(load.Slots), res.Restored,
			src.Manifest.Shards[load.Shard].CapturedAt.Format(time.RFC3339), load.Pod, aofNote(res))
	}
	if len(st.LoadedShards) == len(src.Manifest.Shards) {
		ended, running, err := l.appendOnlyOn(t, step.Addrs)
		if err != nil || !ended {
			return pending || running, errors.Join(append(errs, err)...)
		}
		now := metav1.Now()
		st.CompletedAt = &now
		if src.Archive != nil {
			l.event(t, corev1.EventTypeNormal, report.ReasonRestoreCompleted, "Restore", "restored %d keys in %d shards from the archive %s to %s: %s",
				st.Keys, len(st.LoadedShards), src.Location, st.Target, archiveReached(st.ArchiveShards))
			return pending, errors.Join(errs...)
		}
		l.event(t, corev1.EventTypeNormal, report.ReasonRestoreCompleted, "Restore", "restored %d keys in %d shards from %s (backup completed at %s)",
			st.Keys, len(st.LoadedShards), src.Location, src.Manifest.CompletedAt.Format(time.RFC3339))
	}
	return pending, errors.Join(errs...)
}

// appendOnlyOn makes sure, before a restore counts as done, that every node of the cluster
// (addrs, the answering ones) has its AOF on and rewritten, turning it on where a paused
// load left it off (rdbload.EnsureAppendOnly): a load tried again after an operator that
// died mid-load pauses and resumes the nodes of its shard as they are then, and a replica
// re-pointed meanwhile would otherwise keep its AOF off. It runs in the background like a
// load; ended says it finished well, running that it is under way.
func (l *Loader) appendOnlyOn(t Target, addrs []string) (ended, running bool, _ error) {
	k := restore.Key{Cluster: client.ObjectKeyFromObject(t.Cluster), Node: "every node's AOF", Shard: -1}
	_, ended, running, err := l.background(t, k, "the AOF check at the restore's end", report.ReasonRestoreFailed, "Restore",
		"every shard is loaded, but %v; tried again in %s", func(bool) func(context.Context) (restore.Result, error) {
			nodes := make([]rdbstream.Options, len(addrs))
			for i, addr := range addrs {
				nodes[i] = t.node(addr)
			}
			return func(ctx context.Context) (restore.Result, error) {
				return restore.Result{}, rdbload.EnsureAppendOnly(ctx, nodes)
			}
		})
	return ended && err == nil, running, err
}

// aofNote says, for a shard's loaded event, that its nodes loaded with their AOF off.
func aofNote(res restore.Result) string {
	if !res.AppendOnlyPaused {
		return ""
	}
	return "; its nodes loaded with their AOF off and rewrote it once the keys were in"
}

// recordReplay records in the restore's status how far the loaded shard was replayed, with
// an event (note ends its message).
func (l *Loader) recordReplay(t Target, src *restore.Source, load plan.ShardLoad, res redisarchive.ReplayResult, note string) {
	tl := src.Archive.Timelines[load.Shard]
	shard := redisv1alpha1.RestoreArchiveShard{Shard: tl.Shard, Timeline: int32(tl.Timeline), Offset: max(res.Offset, tl.Base.ReplicationOffset), //nolint:gosec // timelines are few
		Commands: int64(res.Commands)}
	reached := "its base"
	if !res.Reached.IsZero() {
		at := metav1.NewMicroTime(res.Reached)
		shard.Reached = &at
		reached = res.Reached.UTC().Format(time.RFC3339Nano)
	}
	st := t.Next.Status.Restore
	st.ArchiveShards = append(st.ArchiveShards, shard)
	l.event(t, corev1.EventTypeNormal, report.ReasonRestoreShardLoaded, "Restore", "loaded %s (slots %s) from its base of timeline %d and %d archived commands, up to %s, into %s%s",
		tl.Shard, nodes.FormatSlotRanges(load.Slots), tl.Timeline, res.Commands, reached, load.Pod, note)
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
