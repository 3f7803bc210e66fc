package redis

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/archiver"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/restore"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// syncArchive starts, keeps or stops the followers of s's cluster as spec.archive says,
// tells them where each shard's nodes are now (from this reconcile's snapshot), and writes
// the archive's status, condition and events.
func (r *RedisClusterReconciler) syncArchive(ctx context.Context, s *state) {
	key := client.ObjectKeyFromObject(s.rc)
	spec := s.rc.Spec.Archive
	if spec == nil || s.rc.Spec.Pause {
		r.archives.Stop(key)
		if spec == nil {
			s.next.Status.Archive = nil
			meta.RemoveStatusCondition(&s.next.Status.Conditions, report.ConditionArchiving)
			metrics.ForgetRedisArchive(key.Namespace, key.Name)
		} else {
			metrics.RedisArchiveShardsFollowing.WithLabelValues(key.Namespace, key.Name).Set(0)
		}
		return
	}
	if report.RestoreProgress(s.next) != "" {
		r.setArchiving(s, metav1.ConditionFalse, report.ReasonArchiveWaiting, "the archive starts once the restore is done")
		return
	}
	sources, problem := archiveSources(s)
	ca := r.archives.Get(key)
	if ca != nil && (!equality.Semantic.DeepEqual(ca.Destination, spec.Destination) || (problem == "" && !sameShards(ca.Shards, sources))) {
		// Another store, or the shards' slots moved: each shard's loop finds its own
		// timeline again (a new base where its slots changed).
		r.archives.Stop(key)
		ca = nil
	}
	if ca == nil {
		if problem == "" && s.step.Kind == plan.StepRecover {
			// A repair may re-point a replica (a new cluster's placement fix, say): a follower
			// started at it would need a new base, and a new timeline, right away.
			problem = "the archive starts once the repair under way ends (" + s.step.Reason + ")"
		}
		if problem != "" {
			r.setArchiving(s, metav1.ConditionFalse, report.ReasonArchiveWaiting, problem)
			return
		}
		var err error
		if ca, err = r.startArchive(ctx, s, sources); err != nil {
			log.FromContext(ctx).Info("the archive's object store cannot be used", "error", objectstore.Detail(err))
			r.setArchiving(s, metav1.ConditionFalse, archiver.ReasonFailing, err.Error())
			return
		}
	}
	conn := archiver.Conn{Login: s.login(), TLS: s.certs.Config}
	schedule := archiver.ScheduleOf(spec)
	for i, sh := range ca.Shards {
		// The schedule is the spec's whatever the cluster's state: a retention raised while a
		// node is unsettled must hold from the next prune on.
		sh.SetSchedule(schedule)
		if problem == "" {
			sh.Update(sources[i], conn)
		}
	}
	r.reportArchive(s, ca)
}

// archiveSources are the shards of s's snapshot with the node each is followed at (an
// in-sync replica where there is one), in slot order; problem says why there are none.
func archiveSources(s *state) ([]health.ShardSource, string) {
	if len(s.snap.Nodes) == 0 {
		return nil, "the nodes were not observed"
	}
	slots, err := health.StableSlotMap(s.snap, health.Assess(s.snap))
	if err != nil {
		return nil, "waiting for a stable slot map: " + err.Error()
	}
	sources := health.BackupSources(s.snap, slots)
	for _, src := range sources {
		if src.Addr == "" {
			return nil, fmt.Sprintf("the node serving slots %s does not answer", nodes.FormatSlotRanges(src.Slots))
		}
	}
	return sources, ""
}

// sameShards reports whether the running shards serve the slots of sources, in order.
func sameShards(shards []*archiver.Shard, sources []health.ShardSource) bool {
	if len(shards) != len(sources) {
		return false
	}
	for i, sh := range shards {
		if !slices.Equal(sh.Slots(), sources[i].Slots) {
			return false
		}
	}
	return true
}

// startArchive opens the archive's store and starts a follower loop per shard.
func (r *RedisClusterReconciler) startArchive(ctx context.Context, s *state, sources []health.ShardSource) (*archiver.Cluster, error) {
	dest := s.rc.Spec.Archive.Destination
	dir := restore.ArchiveFolder(s.rc.Namespace, dest)
	store, err := (backupstore.Opener{Reader: r.APIReader, Policy: r.StorePolicy}).Open(ctx, "spec.archive.destination.endpoint", s.rc.Namespace, dest, dir)
	if err == nil {
		err = store.Check(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("the archive's object store cannot be used: %w", err)
	}
	location := backupstore.Location(dest, path.Join(dir, s.rc.Name, "archive"))
	sink := redisarchive.StoreSink{Client: store, Fence: r.ArchiveFence}
	return r.archives.Start(client.ObjectKeyFromObject(s.rc), dest, location, sources, sink, archiver.Conn{Login: s.login(), TLS: s.certs.Config},
		archiver.ScheduleOf(s.rc.Spec.Archive)), nil
}

// replicationOffset is the replication offset (master_repl_offset of INFO replication) of
// the pod named pod in snap, false when it did not answer.
func replicationOffset(snap observe.Snapshot, pod string) (int64, bool) {
	for _, o := range snap.Answering() {
		if o.Pod == pod {
			n, err := strconv.ParseInt(o.Replication["master_repl_offset"], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// reportArchive writes the archive's status and condition from what its shards report,
// and sends the events they left.
func (r *RedisClusterReconciler) reportArchive(s *state, ca *archiver.Cluster) {
	st := &redisv1alpha1.ArchiveStatus{Location: ca.Location}
	running, failing := 0, ""
	var flushes []archiver.Event
	reason := report.ReasonArchiving
	ns, name := s.rc.Namespace, s.rc.Name
	for _, sh := range ca.Shards {
		shardStatus, events, ok, problem := sh.Report()
		st.Shards = append(st.Shards, shardStatus)
		for _, e := range events {
			if e.Reason == archiver.ReasonFlush {
				flushes = append(flushes, e)
				continue
			}
			r.event(s, e.Kind, e.Reason, "Archive", "%s", e.Message)
			if e.Reason == archiver.ReasonGap {
				metrics.RedisArchiveGaps.WithLabelValues(ns, name).Inc()
			}
		}
		if shardStatus.ArchivedUpTo != nil {
			metrics.RedisArchiveLastWrite.WithLabelValues(ns, name, sh.Name()).Set(float64(shardStatus.ArchivedUpTo.UnixMilli()) / 1000)
		}
		if offset, ok := replicationOffset(s.snap, shardStatus.Source); ok && shardStatus.Timeline > 0 {
			behind, since, added := sh.Lag(int(shardStatus.Timeline), shardStatus.BaseOffset, shardStatus.ArchivedOffset, offset, time.Now())
			metrics.RedisArchiveLagBytes.WithLabelValues(ns, name, sh.Name()).Set(float64(behind))
			metrics.RedisArchiveLagSeconds.WithLabelValues(ns, name, sh.Name()).Set(since.Seconds())
			metrics.RedisArchiveBytes.WithLabelValues(ns, name).Add(float64(added))
		}
		switch {
		case ok:
			running++
		case problem != "" && failing == "":
			failing, reason = fmt.Sprintf("%s: %s", sh.Name(), problem), archiver.ReasonFailing
		}
	}
	if len(flushes) > 0 {
		// One event for the shards' flushes (a FLUSHALL through a cluster client reaches every
		// master): the target that undoes them is before the earliest.
		earliest, what := flushes[0].At, make([]string, 0, len(flushes))
		for _, e := range flushes {
			earliest = minTime(earliest, e.At)
			what = append(what, e.Message)
		}
		r.event(s, corev1.EventTypeNormal, archiver.ReasonFlush, "Archive", "FLUSHALL or FLUSHDB received by %s: to undo it, restore this archive (spec.restore.archive) to targetTime %s",
			strings.Join(what, ", "), earliest.Add(-time.Millisecond).Format(time.RFC3339Nano))
	}
	st.RecoverableFrom = recoverableFrom(st.Shards)
	s.next.Status.Archive = st
	metrics.RedisArchiveShards.WithLabelValues(ns, name).Set(float64(len(ca.Shards)))
	metrics.RedisArchiveShardsFollowing.WithLabelValues(ns, name).Set(float64(running))
	switch {
	case running == len(ca.Shards):
		r.setArchiving(s, metav1.ConditionTrue, report.ReasonArchiving, fmt.Sprintf("every shard's writes go to %s", ca.Location))
	case failing != "":
		r.setArchiving(s, metav1.ConditionFalse, reason, failing)
	default:
		r.setArchiving(s, metav1.ConditionFalse, report.ReasonArchiveStarting, fmt.Sprintf("%d of %d shards archived; the others take their base", running, len(ca.Shards)))
	}
}

// recoverableFrom is the earliest time every shard has a base at or before: the latest of
// their oldest bases; nil while a shard has none.
func recoverableFrom(shards []redisv1alpha1.ArchiveShardStatus) *metav1.Time {
	var from *metav1.Time
	for i := range shards {
		o := shards[i].OldestBase
		if o == nil {
			return nil
		}
		if from == nil || o.After(from.Time) {
			from = o
		}
	}
	return from
}

// setArchiving sets the Archiving condition.
func (r *RedisClusterReconciler) setArchiving(s *state, cond metav1.ConditionStatus, reason, message string) {
	status.Set(&s.next.Status.Conditions, s.rc.Generation, report.ConditionArchiving, cond, reason, message)
}

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
