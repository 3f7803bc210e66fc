package archiver

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
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/restore"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// Stage is the RedisCluster controller's archive stage, after the report: it starts, keeps
// or stops the followers of a cluster as spec.archive says (in Registry), and writes the
// archive's status, condition, events and metrics.
type Stage struct {
	// Registry holds the running followers.
	Registry *Registry
	// Recorder sends the archive's events.
	Recorder events.EventRecorder
	// Stores opens the archive's object store (spec.archive.destination).
	Stores backupstore.Opener
	// Fence is checked before every write the archive makes to the store.
	Fence func(context.Context) error
}

// Look is what a reconcile gives the archive stage.
type Look struct {
	// Cluster is the RedisCluster as read; Next the copy whose status the reconcile writes.
	Cluster, Next *redisv1alpha1.RedisCluster
	// Snap is the reconcile's look at the nodes.
	Snap observe.Snapshot
	// Repairing is the reason of a topology repair (plan.StepRecover) the reconcile
	// planned, "" for none: a follower does not start at a replica it may re-point.
	Repairing string
	// Conn is how to reach the nodes.
	Conn Conn
}

// Sync starts, keeps or stops the followers of the look's cluster as spec.archive says,
// tells them where each shard's nodes are now (from the look's snapshot), and writes the
// archive's status, condition and events into l.Next.
func (st *Stage) Sync(ctx context.Context, l Look) {
	key := client.ObjectKeyFromObject(l.Cluster)
	spec := l.Cluster.Spec.Archive
	if spec == nil || l.Cluster.Spec.Pause {
		st.Registry.Stop(key)
		if spec == nil {
			l.Next.Status.Archive = nil
			meta.RemoveStatusCondition(&l.Next.Status.Conditions, report.ConditionArchiving)
			metrics.ForgetRedisArchive(key.Namespace, key.Name)
		} else {
			metrics.RedisArchiveShardsFollowing.WithLabelValues(key.Namespace, key.Name).Set(0)
		}
		return
	}
	if report.RestoreProgress(l.Next) != "" {
		setArchiving(l, metav1.ConditionFalse, report.ReasonArchiveWaiting, "the archive starts once the restore is done")
		return
	}
	sources, problem := archiveSources(l.Snap)
	ca := st.Registry.Get(key)
	if ca != nil && (!equality.Semantic.DeepEqual(ca.Destination, spec.Destination) || (problem == "" && !sameShards(ca.Shards, sources))) {
		// Another store, or the shards' slots moved: each shard's loop finds its own
		// timeline again (a new base where its slots changed).
		st.Registry.Stop(key)
		ca = nil
	}
	if ca == nil {
		if problem == "" && l.Repairing != "" {
			// A repair may re-point a replica (a new cluster's placement fix, say): a follower
			// started at it would need a new base, and a new timeline, right away.
			problem = "the archive starts once the repair under way ends (" + l.Repairing + ")"
		}
		if problem != "" {
			setArchiving(l, metav1.ConditionFalse, report.ReasonArchiveWaiting, problem)
			return
		}
		var err error
		if ca, err = st.start(ctx, l, sources); err != nil {
			log.FromContext(ctx).Info("the archive's object store cannot be used", "error", objectstore.Detail(err))
			setArchiving(l, metav1.ConditionFalse, ReasonFailing, err.Error())
			return
		}
	}
	schedule := ScheduleOf(spec)
	for i, sh := range ca.Shards {
		// The schedule is the spec's whatever the cluster's state: a retention raised while a
		// node is unsettled must hold from the next prune on.
		sh.SetSchedule(schedule)
		if problem == "" {
			sh.Update(sources[i], l.Conn)
		}
	}
	st.report(l, ca)
}

// archiveSources are the shards of snap with the node each is followed at (an in-sync
// replica where there is one), in slot order; problem says why there are none.
func archiveSources(snap observe.Snapshot) ([]health.ShardSource, string) {
	if len(snap.Nodes) == 0 {
		return nil, "the nodes were not observed"
	}
	slots, err := health.StableSlotMap(snap, health.Assess(snap))
	if err != nil {
		return nil, "waiting for a stable slot map: " + err.Error()
	}
	sources := health.BackupSources(snap, slots)
	for _, src := range sources {
		if src.Addr == "" {
			return nil, fmt.Sprintf("the node serving slots %s does not answer", nodes.FormatSlotRanges(src.Slots))
		}
	}
	return sources, ""
}

// sameShards reports whether the running shards serve the slots of sources, in order.
func sameShards(shards []*Shard, sources []health.ShardSource) bool {
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

// start opens the archive's store and starts a follower loop per shard.
func (st *Stage) start(ctx context.Context, l Look, sources []health.ShardSource) (*Cluster, error) {
	dest := l.Cluster.Spec.Archive.Destination
	dir := restore.ArchiveFolder(l.Cluster.Namespace, dest)
	store, err := st.Stores.Open(ctx, "spec.archive.destination.endpoint", l.Cluster.Namespace, dest, dir)
	if err == nil {
		err = store.Check(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("the archive's object store cannot be used: %w", err)
	}
	location := backupstore.Location(dest, path.Join(dir, l.Cluster.Name, "archive"))
	sink := redisarchive.StoreSink{Client: store, Fence: st.Fence}
	return st.Registry.Start(client.ObjectKeyFromObject(l.Cluster), dest, location, sources, sink, l.Conn,
		ScheduleOf(l.Cluster.Spec.Archive)), nil
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

// report writes the archive's status and condition from what its shards report, and sends
// the events they left.
func (st *Stage) report(l Look, ca *Cluster) {
	out := &redisv1alpha1.ArchiveStatus{Location: ca.Location}
	running, failing := 0, ""
	var flushes []Event
	reason := report.ReasonArchiving
	ns, name := l.Cluster.Namespace, l.Cluster.Name
	for _, sh := range ca.Shards {
		shardStatus, events, ok, problem := sh.Report()
		out.Shards = append(out.Shards, shardStatus)
		for _, e := range events {
			if e.Reason == ReasonFlush {
				flushes = append(flushes, e)
				continue
			}
			st.Recorder.Eventf(l.Cluster, nil, e.Kind, e.Reason, "Archive", "%s", e.Message)
			if e.Reason == ReasonGap {
				metrics.RedisArchiveGaps.WithLabelValues(ns, name).Inc()
			}
		}
		if shardStatus.ArchivedUpTo != nil {
			metrics.RedisArchiveLastWrite.WithLabelValues(ns, name, sh.Name()).Set(float64(shardStatus.ArchivedUpTo.UnixMilli()) / 1000)
		}
		if offset, ok := replicationOffset(l.Snap, shardStatus.Source); ok && shardStatus.Timeline > 0 {
			behind, since, added := sh.Lag(int(shardStatus.Timeline), shardStatus.BaseOffset, shardStatus.ArchivedOffset, offset, time.Now())
			metrics.RedisArchiveLagBytes.WithLabelValues(ns, name, sh.Name()).Set(float64(behind))
			metrics.RedisArchiveLagSeconds.WithLabelValues(ns, name, sh.Name()).Set(since.Seconds())
			metrics.RedisArchiveBytes.WithLabelValues(ns, name).Add(float64(added))
		}
		switch {
		case ok:
			running++
		case problem != "" && failing == "":
			failing, reason = fmt.Sprintf("%s: %s", sh.Name(), problem), ReasonFailing
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
		st.Recorder.Eventf(l.Cluster, nil, corev1.EventTypeNormal, ReasonFlush, "Archive", "FLUSHALL or FLUSHDB received by %s: to undo it, restore this archive (spec.restore.archive) to targetTime %s",
			strings.Join(what, ", "), earliest.Add(-time.Millisecond).Format(time.RFC3339Nano))
	}
	out.RecoverableFrom = recoverableFrom(out.Shards)
	l.Next.Status.Archive = out
	metrics.RedisArchiveShards.WithLabelValues(ns, name).Set(float64(len(ca.Shards)))
	metrics.RedisArchiveShardsFollowing.WithLabelValues(ns, name).Set(float64(running))
	switch {
	case running == len(ca.Shards):
		setArchiving(l, metav1.ConditionTrue, report.ReasonArchiving, fmt.Sprintf("every shard's writes go to %s", ca.Location))
	case failing != "":
		setArchiving(l, metav1.ConditionFalse, reason, failing)
	default:
		setArchiving(l, metav1.ConditionFalse, report.ReasonArchiveStarting, fmt.Sprintf("%d of %d shards archived; the others take their base", running, len(ca.Shards)))
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
func setArchiving(l Look, cond metav1.ConditionStatus, reason, message string) {
	status.Set(&l.Next.Status.Conditions, l.Cluster.Generation, report.ConditionArchiving, cond, reason, message)
}

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
