package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// ConditionArchiving says whether every shard of a cluster with spec.archive is archived.
const ConditionArchiving = "Archiving"

// The reasons of the Archiving condition and of the archive's events.
const (
	// ReasonArchiving: every shard's follower runs on its timeline.
	ReasonArchiving = "Archiving"
	// ReasonArchiveStarting: a shard's base is being taken, or its follower starts.
	ReasonArchiveStarting = "ArchiveStarting"
	// ReasonArchiveWaiting: the archive waits for the cluster (a restore, a slot map that
	// is not stable yet).
	ReasonArchiveWaiting = "ArchiveWaiting"
	// ReasonArchiveFailing: a shard's follower or base failed and is tried again.
	ReasonArchiveFailing = "ArchiveFailing"
	// ReasonArchiveGap: the history of a shard could not be continued; a new base starts
	// the next timeline (an event).
	ReasonArchiveGap = "ArchiveGap"
	// ReasonArchiveTimelineStarted: a shard's base was taken and its timeline starts (an
	// event).
	ReasonArchiveTimelineStarted = "ArchiveTimelineStarted"
	// ReasonArchiveFlush: a shard's archive received a FLUSHALL or FLUSHDB (an event
	// naming its time, to which a restore just before undoes it).
	ReasonArchiveFlush = "ArchiveFlush"
	// ReasonArchivePruned: spec.archive.retention deleted a shard's old timelines (an
	// event); ReasonArchivePruneFailed: they could not be listed or deleted (a Warning
	// event; tried again at the shard's next base).
	ReasonArchivePruned      = "ArchivePruned"
	ReasonArchivePruneFailed = "ArchivePruneFailed"
)

// archiveBaseEvery is spec.archive.baseEvery when unset: a new base a day.
const archiveBaseEvery = 24 * time.Hour

// archiveSchedule is when a shard takes its next base and how long its archive is kept.
type archiveSchedule struct {
	baseEvery, retention time.Duration
}

// scheduleOf reads spec.archive's schedule (a zero retention keeps everything).
func scheduleOf(spec *redisv1alpha1.ArchiveSpec) archiveSchedule {
	out := archiveSchedule{baseEvery: archiveBaseEvery}
	if spec.BaseEvery != nil && spec.BaseEvery.Duration > 0 {
		out.baseEvery = spec.BaseEvery.Duration
	}
	if spec.Retention != nil {
		out.retention = spec.Retention.Duration
	}
	return out
}

// archiveRetryMax bounds the wait between two tries of a shard whose follower or base
// failed.
const archiveRetryMax = 30 * time.Second

// archives runs the followers of the clusters with spec.archive: one per shard, in the
// background, from the leader's reconciles (only the leader reconciles). Each follower
// holds at most about 33 MiB (two segments of 16 MiB and a read buffer, see
// internal/redisarchive): the operator's memory grows by that much per archived shard.
type archives struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*clusterArchive
}

// clusterArchive is the archive of one cluster: its store and its shards' followers.
type clusterArchive struct {
	destination redisv1alpha1.ObjectStore
	location    string
	cancel      context.CancelFunc
	shards      []*shardArchive
}

// archiveConn is how a shard's follower reaches the nodes.
type archiveConn struct {
	login conn.Login
	tls   *tls.Config
}

// shardArchive is one shard's follower loop and what it reports.
type shardArchive struct {
	cluster string
	name    string
	slots   []nodes.SlotRange
	sink    redisarchive.StoreSink

	mu     sync.Mutex
	source health.ShardSource
	// A replica's backlog begins where it last synced with its master, so a replica
	// restarted since the archive's end cannot continue the history while its master
	// (source.MasterAddr) still can: askMaster sends the next connection there, and
	// askedMaster says it went there.
	askMaster, askedMaster bool
	conn                   archiveConn
	schedule               archiveSchedule
	timeline               int
	base                   backup.Shard
	// baseRetryAt postpones the next scheduled base after one failed.
	baseRetryAt time.Time
	// gapNoted is the timeline whose end the ArchiveGap event was sent for (only the loop
	// reads and writes it).
	gapNoted int
	// oldest is the capture time of the shard's oldest timeline kept in the archive.
	oldest time.Time
	// lastFlush is the receive time of the last FLUSHALL or FLUSHDB any of the shard's
	// followers received, lastFlushOffset the offset after it: a scheduled base's reader
	// receives again, at its catch-up's time, a flush the current one already had.
	lastFlush       time.Time
	lastFlushOffset int64
	follower        *redisarchive.Follower
	// last is the progress of the timeline's last follower, shown while the next starts.
	last     redisarchive.Progress
	starting bool
	stopped  bool
	lastErr  string
	events   []archiveEvent // not yet reported
}

// archiveEvent is an event a shard's loop leaves for the next reconcile to send.
type archiveEvent struct {
	kind, reason, message string
	// at is the time of a flush (ReasonArchiveFlush): the shards' flushes make one event.
	at time.Time
}

// syncArchive starts, keeps or stops the followers of s's cluster as spec.archive says,
// tells them where each shard's nodes are now (from this reconcile's snapshot), and writes
// the archive's status, condition and events.
func (r *RedisClusterReconciler) syncArchive(ctx context.Context, s *state) {
	key := client.ObjectKeyFromObject(s.rc)
	spec := s.rc.Spec.Archive
	if spec == nil || s.rc.Spec.Pause {
		r.archives.stop(key)
		if spec == nil {
			s.next.Status.Archive = nil
			meta.RemoveStatusCondition(&s.next.Status.Conditions, ConditionArchiving)
			metrics.ForgetRedisArchive(key.Namespace, key.Name)
		} else {
			metrics.RedisArchiveShardsFollowing.WithLabelValues(key.Namespace, key.Name).Set(0)
		}
		return
	}
	if restoreProgress(s) != "" {
		r.setArchiving(s, metav1.ConditionFalse, ReasonArchiveWaiting, "the archive starts once the restore is done")
		return
	}
	sources, problem := archiveSources(s)
	ca := r.archives.get(key)
	if ca != nil && (!equality.Semantic.DeepEqual(ca.destination, spec.Destination) || (problem == "" && !sameShards(ca.shards, sources))) {
		// Another store, or the shards' slots moved: each shard's loop finds its own
		// timeline again (a new base where its slots changed).
		r.archives.stop(key)
		ca = nil
	}
	if ca == nil {
		if problem != "" {
			r.setArchiving(s, metav1.ConditionFalse, ReasonArchiveWaiting, problem)
			return
		}
		var err error
		if ca, err = r.startArchive(ctx, s, sources); err != nil {
			log.FromContext(ctx).Info("the archive's object store cannot be used", "error", objectstore.Detail(err))
			r.setArchiving(s, metav1.ConditionFalse, ReasonArchiveFailing, err.Error())
			return
		}
	}
	conn := archiveConn{login: s.login(), tls: s.tls}
	schedule := scheduleOf(spec)
	for i, sh := range ca.shards {
		// The schedule is the spec's whatever the cluster's state: a retention raised while a
		// node is unsettled must hold from the next prune on.
		sh.setSchedule(schedule)
		if problem == "" {
			sh.update(sources[i], conn)
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
func sameShards(shards []*shardArchive, sources []health.ShardSource) bool {
	if len(shards) != len(sources) {
		return false
	}
	for i, sh := range shards {
		if !slices.Equal(sh.slots, sources[i].Slots) {
			return false
		}
	}
	return true
}

// archiveFolder is where a cluster's archive goes in its destination's bucket: the
// destination's path, the cluster's namespace when empty (the archive is the folder
// <cluster>/archive under it).
func archiveFolder(namespace string, dest redisv1alpha1.ObjectStore) string {
	if dir := strings.Trim(dest.Path, "/"); dir != "" {
		return dir
	}
	return namespace
}

// startArchive opens the archive's store and starts a follower loop per shard.
func (r *RedisClusterReconciler) startArchive(ctx context.Context, s *state, sources []health.ShardSource) (*clusterArchive, error) {
	dest := s.rc.Spec.Archive.Destination
	dir := archiveFolder(s.rc.Namespace, dest)
	store, err := (backupstore.Opener{Reader: r.APIReader, Policy: r.StorePolicy}).Open(ctx, "spec.archive.destination.endpoint", s.rc.Namespace, dest, dir)
	if err == nil {
		err = store.Check(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("the archive's object store cannot be used: %w", err)
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	ca := &clusterArchive{destination: dest, location: backupstore.Location(dest, path.Join(dir, s.rc.Name, "archive")), cancel: cancel}
	conn := archiveConn{login: s.login(), tls: s.tls}
	for i, src := range sources {
		sh := &shardArchive{cluster: s.rc.Name, name: redisarchive.ShardName(i), slots: src.Slots, sink: redisarchive.StoreSink{Client: store, Fence: r.ArchiveFence},
			source: src, conn: conn, schedule: scheduleOf(s.rc.Spec.Archive), starting: true}
		ca.shards = append(ca.shards, sh)
		go sh.run(loopCtx)
	}
	r.archives.put(client.ObjectKeyFromObject(s.rc), ca)
	return ca, nil
}

// reportArchive writes the archive's status and condition from what its shards report,
// and sends the events they left.
func (r *RedisClusterReconciler) reportArchive(s *state, ca *clusterArchive) {
	st := &redisv1alpha1.ArchiveStatus{Location: ca.location}
	running, failing := 0, ""
	var flushes []archiveEvent
	reason := ReasonArchiving
	ns, name := s.rc.Namespace, s.rc.Name
	for _, sh := range ca.shards {
		shardStatus, events, ok, problem := sh.report()
		st.Shards = append(st.Shards, shardStatus)
		for _, e := range events {
			if e.reason == ReasonArchiveFlush {
				flushes = append(flushes, e)
				continue
			}
			r.event(s, e.kind, e.reason, "Archive", "%s", e.message)
			if e.reason == ReasonArchiveGap {
				metrics.RedisArchiveGaps.WithLabelValues(ns, name).Inc()
			}
		}
		if shardStatus.ArchivedUpTo != nil {
			metrics.RedisArchiveLastWrite.WithLabelValues(ns, name, sh.name).Set(float64(shardStatus.ArchivedUpTo.UnixMilli()) / 1000)
		}
		switch {
		case ok:
			running++
		case problem != "" && failing == "":
			failing, reason = fmt.Sprintf("%s: %s", sh.name, problem), ReasonArchiveFailing
		}
	}
	if len(flushes) > 0 {
		// One event for the shards' flushes (a FLUSHALL through a cluster client reaches every
		// master): the target that undoes them is before the earliest.
		earliest, what := flushes[0].at, make([]string, 0, len(flushes))
		for _, e := range flushes {
			earliest = minTime(earliest, e.at)
			what = append(what, e.message)
		}
		r.event(s, corev1.EventTypeNormal, ReasonArchiveFlush, "Archive", "FLUSHALL or FLUSHDB received by %s: to undo it, restore this archive (spec.restore.archive) to targetTime %s",
			strings.Join(what, ", "), earliest.Add(-time.Millisecond).Format(time.RFC3339Nano))
	}
	st.RecoverableFrom = recoverableFrom(st.Shards)
	s.next.Status.Archive = st
	metrics.RedisArchiveShards.WithLabelValues(ns, name).Set(float64(len(ca.shards)))
	metrics.RedisArchiveShardsFollowing.WithLabelValues(ns, name).Set(float64(running))
	switch {
	case running == len(ca.shards):
		r.setArchiving(s, metav1.ConditionTrue, ReasonArchiving, fmt.Sprintf("every shard's writes go to %s", ca.location))
	case failing != "":
		r.setArchiving(s, metav1.ConditionFalse, reason, failing)
	default:
		r.setArchiving(s, metav1.ConditionFalse, ReasonArchiveStarting, fmt.Sprintf("%d of %d shards archived; the others take their base", running, len(ca.shards)))
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
	status.Set(&s.next.Status.Conditions, s.rc.Generation, ConditionArchiving, cond, reason, message)
}

// get returns the running archive of cluster, nil when none runs.
func (a *archives) get(cluster types.NamespacedName) *clusterArchive {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clusters[cluster]
}

// put records the running archive of cluster.
func (a *archives) put(cluster types.NamespacedName, ca *clusterArchive) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.clusters == nil {
		a.clusters = map[types.NamespacedName]*clusterArchive{}
	}
	a.clusters[cluster] = ca
}

// archiveStopGrace is how long a stopped follower has to write its open segment before
// its context ends (it is then abandoned, as a crash would; the next start resumes where
// the last closed segment ends).
const archiveStopGrace = 10 * time.Second

// stop stops the followers of cluster: each writes its open segment and ends (a deleted
// cluster's last writes are archived).
func (a *archives) stop(cluster types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ca := a.clusters[cluster]
	if ca == nil {
		return
	}
	delete(a.clusters, cluster)
	for _, sh := range ca.shards {
		sh.stop()
	}
	time.AfterFunc(archiveStopGrace, ca.cancel)
}

// stop ends the shard's loop, its follower writing its open segment first.
func (sh *shardArchive) stop() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.stopped {
		sh.stopped = true
		if sh.follower != nil {
			sh.follower.Stop()
		}
	}
}

// isStopped reports whether stop was called.
func (sh *shardArchive) isStopped() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.stopped
}

// update tells the shard's loop where its shard is followed now and how to log in.
func (sh *shardArchive) update(src health.ShardSource, conn archiveConn) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.source, sh.conn = src, conn
}

// setSchedule tells the shard's loop when to take bases and how long to keep them.
func (sh *shardArchive) setSchedule(schedule archiveSchedule) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.schedule = schedule
}

// current is where the shard is followed now.
func (sh *shardArchive) current() (health.ShardSource, rdbstream.Options) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.source, rdbstream.Options{Addr: sh.source.Addr, Username: sh.conn.login.User, Password: sh.conn.login.Password, TLS: sh.conn.tls}
}

// report is the shard's status, the events not yet sent, whether its follower runs, and
// its last failure.
func (sh *shardArchive) report() (redisv1alpha1.ArchiveShardStatus, []archiveEvent, bool, string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := redisv1alpha1.ArchiveShardStatus{Shard: sh.name, Slots: nodes.FormatSlotRanges(sh.slots), Timeline: int32(sh.timeline), //nolint:gosec // timelines are few
		Source: sh.source.Pod, LastError: sh.lastErr}
	if sh.timeline > 0 {
		st.BaseOffset = sh.base.ReplicationOffset
		captured := metav1.NewTime(sh.base.CapturedAt)
		st.BaseCapturedAt = &captured
		st.ArchivedOffset = sh.base.ReplicationOffset
	}
	if !sh.oldest.IsZero() {
		oldest := metav1.NewTime(sh.oldest)
		st.OldestBase = &oldest
	}
	running, p := false, sh.last
	if sh.follower != nil {
		p = sh.follower.Progress()
		running = !sh.starting && p.LastError == "" // connected, or not failed since it last was
	}
	if p.Archived > 0 {
		st.ArchivedOffset = p.Archived
		if !p.LastArchived.IsZero() {
			t := metav1.NewMicroTime(p.LastArchived)
			st.ArchivedUpTo = &t
		}
	}
	if p.LastError != "" && sh.follower != nil {
		st.LastError = p.LastError
	}
	if p.LastFlushOffset > sh.lastFlushOffset {
		sh.lastFlush, sh.lastFlushOffset = p.LastFlush, p.LastFlushOffset
		sh.events = append(sh.events, archiveEvent{kind: corev1.EventTypeNormal, reason: ReasonArchiveFlush, at: p.LastFlush,
			message: fmt.Sprintf("%s at %s (offset %d)", sh.name, p.LastFlush.Format(time.RFC3339Nano), p.LastFlushOffset)})
	}
	if !sh.lastFlush.IsZero() {
		at := metav1.NewMicroTime(sh.lastFlush)
		st.LastFlush = &at
	}
	events := sh.events
	sh.events = nil
	return st, events, running, sh.lastErr
}

// note records an event for the next reconcile.
func (sh *shardArchive) note(kind, reason, format string, args ...any) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.events = append(sh.events, archiveEvent{kind: kind, reason: reason, message: fmt.Sprintf(format, args...)})
}

// run follows the shard until ctx ends: from the end of its timeline's archive (Resume),
// or from a new base when there is none or the history broke (a GapError: the next
// timeline). A failure is tried again after a growing wait.
func (sh *shardArchive) run(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil && !sh.isStopped() {
		err := sh.follow(ctx)
		if ctx.Err() != nil || sh.isStopped() {
			return
		}
		sh.mu.Lock()
		if sh.follower != nil {
			sh.last = sh.follower.Progress()
		}
		sh.follower, sh.starting = nil, true
		if err != nil {
			failures++
			sh.lastErr = err.Error()
			if errors.Is(err, redisarchive.ErrFenced) {
				log.FromContext(ctx).Info("the archive's write was refused", "shard", sh.name, "error", err.Error())
			}
		} else {
			failures = 0
		}
		sh.mu.Unlock()
		wait := min(time.Duration(1<<min(failures, 5))*time.Second/2, archiveRetryMax)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// follow takes the shard's timeline (a new base when needed) and runs a follower on it
// until it fails; a gap takes the next timeline's base at once.
func (sh *shardArchive) follow(ctx context.Context) error {
	cur, err := sh.startTimeline(ctx)
	if err != nil || cur == nil {
		return err
	}
	for {
		err := sh.runFollower(ctx, cur)
		var gap *redisarchive.GapError
		if (errors.As(err, &gap) || errors.Is(err, redisarchive.ErrNoMasterLink)) && sh.retryAtMaster() {
			return fmt.Errorf("%w; its master is asked next", err)
		}
		sh.mu.Lock()
		sh.askedMaster = false
		sh.mu.Unlock()
		if !errors.As(err, &gap) {
			return err
		}
		// Once per timeline: a new base that fails (its node lost its master too) meets the
		// same gap again at the next try.
		if sh.gapNoted != sh.timeline {
			sh.gapNoted = sh.timeline
			sh.note(corev1.EventTypeWarning, ReasonArchiveGap, "%s (slots %s) timeline %d ends at offset %d: %v; timeline %d starts from a new base",
				sh.name, nodes.FormatSlotRanges(sh.slots), sh.timeline, gap.From.Offset, err, sh.timeline+1)
		}
		if cur, err = sh.newBase(ctx, sh.timeline+1); err != nil {
			return err
		}
		if !sh.adopt(ctx, cur) {
			return nil
		}
	}
}

// startTimeline starts the shard's follower: where the archive of its timeline ends, or on
// a new timeline (findTimeline). Nil when the shard was stopped meanwhile.
func (sh *shardArchive) startTimeline(ctx context.Context) (*runningFollower, error) {
	if sh.timeline == 0 {
		cur, err := sh.findTimeline(ctx)
		if err != nil {
			return nil, err
		}
		if cur != nil {
			if !sh.adopt(ctx, cur) {
				return nil, nil
			}
			return cur, nil
		}
	}
	from, ok, err := redisarchive.Resume(ctx, sh.sink, sh.cluster, sh.name, sh.timeline)
	if err != nil {
		return nil, fmt.Errorf("while reading where the archive ends: %w", err)
	}
	if !ok {
		from = redisarchive.Position{ReplID: sh.base.ReplicationID, Offset: sh.base.ReplicationOffset}
	}
	_, conn := sh.current()
	f, err := redisarchive.NewFollower(redisarchive.Options{Conn: conn, Master: sh.address, Cluster: sh.cluster, Shard: sh.name,
		Timeline: sh.timeline, From: from, Sink: sh.sink})
	if err != nil {
		return nil, err
	}
	if sh.isStopped() {
		return nil, nil
	}
	cur := startFollower(ctx, f)
	if !sh.adopt(ctx, cur) {
		return nil, nil
	}
	return cur, nil
}

// adopt makes cur the shard's follower and prunes the archive, or, when the shard was
// stopped meanwhile, stops cur and says so (false).
func (sh *shardArchive) adopt(ctx context.Context, cur *runningFollower) bool {
	sh.mu.Lock()
	if sh.stopped {
		sh.mu.Unlock()
		_ = cur.stopAndWait()
		return false
	}
	sh.follower, sh.starting, sh.lastErr = cur.Follower, false, ""
	sh.mu.Unlock()
	sh.prune(ctx)
	return true
}

// retryAtMaster, after a gap, says whether the history may still continue at the shard's
// master (the gap came from a replica, and the master was not asked yet), and if so sends
// the next connection there.
func (sh *shardArchive) retryAtMaster() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.askedMaster || sh.source.MasterAddr == "" || !sh.source.Replica {
		return false
	}
	sh.askMaster = true
	return true
}

// address is where the follower connects: the shard's node as the last reconcile saw it, or
// its master once after a replica could not continue the history.
func (sh *shardArchive) address(context.Context) (string, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.askMaster && sh.source.MasterAddr != "" {
		sh.askMaster, sh.askedMaster = false, true
		return sh.source.MasterAddr, nil
	}
	if sh.source.Addr == "" {
		return "", errors.New("no node of the shard is known")
	}
	return sh.source.Addr, nil
}

// findTimeline takes the shard's last timeline in the archive, or starts one from a new
// base when there is none or its base holds other slots, and then returns its follower
// (nil when the archive's timeline goes on).
func (sh *shardArchive) findTimeline(ctx context.Context) (*runningFollower, error) {
	all, err := redisarchive.BaseTimelines(ctx, sh.sink, sh.cluster)
	if err != nil {
		return nil, fmt.Errorf("while listing the archive's timelines: %w", err)
	}
	last := 0
	var base backup.Shard
	for _, tl := range all {
		if tl.Shard == sh.name && tl.Timeline > last {
			last, base = tl.Timeline, tl.Base
		}
	}
	if last > 0 && slices.Equal(backupstore.Ranges(base.Slots), sh.slots) {
		sh.mu.Lock()
		sh.timeline, sh.base = last, base
		sh.mu.Unlock()
		return nil, nil
	}
	return sh.newBase(ctx, last+1)
}

// newBase takes a snapshot of the shard into the archive as the base of timeline, follows
// the shard from it until its follower has caught up with the node (catchUp), and makes
// timeline the shard's; it returns that follower, running. Nothing goes on before it (a
// first base, a gap, new slots): a restore to a time before the catch-up replays the
// timeline before up to its end, and is refused when that ends before the target (see
// redisarchive.Timeline.Uncovered).
func (sh *shardArchive) newBase(ctx context.Context, timeline int) (*runningFollower, error) {
	base, src, err := sh.takeBase(ctx, timeline)
	if err != nil {
		return nil, err
	}
	_, node := sh.current()
	mark := func() (int64, error) { return redisarchive.ReplicationOffset(ctx, node) }
	next, servesFrom, err := sh.catchUp(ctx, timeline, base, mark, false)
	if err != nil {
		return nil, err
	}
	sh.useBase(timeline, base, src, fmt.Sprintf(" (it serves restores from %s, when its reader had caught up with the node)",
		servesFrom.UTC().Format(time.RFC3339Nano)))
	return next, nil
}

// takeBase takes a snapshot of the shard into the archive as the base of timeline. The
// timeline is not visible to restores until describeBase.
func (sh *shardArchive) takeBase(ctx context.Context, timeline int) (backup.Shard, health.ShardSource, error) {
	src, opts := sh.current()
	opts.ViaDisk = true
	file := redisarchive.BaseRDBName(sh.cluster, sh.name, timeline)
	if err := sh.sink.Check(ctx); err != nil {
		return backup.Shard{}, src, err
	}
	res, _, err := backup.StreamShard(ctx, opts, sh.sink.Client, file)
	if err != nil {
		return backup.Shard{}, src, fmt.Errorf("while taking the base of timeline %d: %w", timeline, err)
	}
	return backupstore.ShardEntry(src, res, file), src, nil
}

// describeBase writes the description of timeline's base (servesFrom and previousWhole as
// EncodeBase says),
// which makes the timeline visible to restores.
func (sh *shardArchive) describeBase(ctx context.Context, timeline int, base backup.Shard, servesFrom, previousWhole time.Time) error {
	data, err := redisarchive.EncodeBase(base, servesFrom, previousWhole)
	if err == nil {
		err = sh.sink.Put(ctx, redisarchive.BaseName(sh.cluster, sh.name, timeline), data)
	}
	if err != nil {
		return fmt.Errorf("while writing the base of timeline %d: %w", timeline, err)
	}
	return nil
}

// useBase makes timeline, from base, the shard's, and says so in an event (why: "" after a
// gap or at the start, else what scheduled it).
func (sh *shardArchive) useBase(timeline int, base backup.Shard, src health.ShardSource, why string) {
	sh.mu.Lock()
	sh.timeline, sh.base, sh.last, sh.baseRetryAt = timeline, base, redisarchive.Progress{}, time.Time{}
	if sh.oldest.IsZero() {
		sh.oldest = base.CapturedAt
	}
	sh.mu.Unlock()
	sh.note(corev1.EventTypeNormal, ReasonArchiveTimelineStarted, "%s (slots %s) timeline %d starts from a base of %d keys at offset %d taken from %s%s",
		sh.name, nodes.FormatSlotRanges(sh.slots), timeline, base.Keys, base.ReplicationOffset, src.Pod, why)
}

// nextBaseAt is when the shard's next scheduled base is due: its timeline's base plus
// baseEvery, or later after a scheduled base failed.
func (sh *shardArchive) nextBaseAt() time.Time {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := sh.base.CapturedAt.Add(sh.schedule.baseEvery)
	if sh.baseRetryAt.After(at) {
		at = sh.baseRetryAt
	}
	return at
}

// runningFollower is a follower whose Run goes on in a goroutine of its own.
type runningFollower struct {
	*redisarchive.Follower
	ended chan struct{} // closed when Run has returned
	err   error         // Run's error, once ended is closed
}

// startFollower runs f in a goroutine of its own.
func startFollower(ctx context.Context, f *redisarchive.Follower) *runningFollower {
	r := &runningFollower{Follower: f, ended: make(chan struct{})}
	go func() {
		r.err = f.Run(ctx)
		close(r.ended)
	}()
	return r
}

// stopAndWait stops the follower (its open segment written) and waits for its Run to end.
func (r *runningFollower) stopAndWait() error {
	r.Stop()
	<-r.ended
	return r.err
}

// runFollower runs f, then each follower that takes over from it, until one ends, and
// moves the shard to its next timeline whenever a scheduled base is due (nextBaseAt): see
// rebase.
func (sh *shardArchive) runFollower(ctx context.Context, cur *runningFollower) error {
	for {
		timer := time.NewTimer(max(time.Until(sh.nextBaseAt()), 0))
		select {
		case <-cur.ended:
			timer.Stop()
			return cur.err
		case <-timer.C:
		}
		next, err := sh.rebase(ctx, cur)
		if err != nil {
			if ctx.Err() != nil {
				return cur.stopAndWait()
			}
			sh.mu.Lock()
			sh.baseRetryAt = time.Now().Add(min(sh.schedule.baseEvery, time.Minute))
			timeline := sh.timeline
			sh.mu.Unlock()
			sh.note(corev1.EventTypeWarning, ReasonArchiveFailing, "%s: the scheduled base failed (%v); timeline %d goes on, and the base is tried again",
				sh.name, err, timeline)
			continue
		}
		if err := cur.stopAndWait(); err != nil {
			log.FromContext(ctx).Info("the archive's follower ended with an error after the next timeline started", "shard", sh.name, "error", err.Error())
		}
		cur = next
		sh.prune(ctx)
	}
}

// rebase starts the shard's next timeline while cur follows the current one, so that every
// second stays restorable: it takes the base; starts a second follower on the new timeline
// from the base's offset, which catches up through the master's backlog; once that one has
// received everything cur had when it started, writes the base's description with that
// time as servesFrom (restores to earlier times replay the current timeline, whose receive
// times are the writes' own, and cur goes on until then); then makes the new timeline and
// its follower the shard's, and returns that follower, still running: the caller stops cur.
// On an error the new timeline's objects are deleted and cur goes on.
func (sh *shardArchive) rebase(ctx context.Context, cur *runningFollower) (*runningFollower, error) {
	sh.mu.Lock()
	timeline, every := sh.timeline+1, sh.schedule.baseEvery
	sh.mu.Unlock()
	base, src, err := sh.takeBase(ctx, timeline)
	if err != nil {
		return nil, err
	}
	mark := func() (int64, error) { return cur.Progress().Received, nil }
	next, servesFrom, err := sh.catchUp(ctx, timeline, base, mark, true)
	if err != nil {
		return nil, err
	}
	sh.useBase(timeline, base, src, fmt.Sprintf(" (spec.archive.baseEvery %s; it serves restores from %s, when it had caught up with timeline %d)",
		every, servesFrom.UTC().Format(time.RFC3339Nano), timeline-1))
	sh.mu.Lock()
	sh.follower = next.Follower
	stopped := sh.stopped // stop came while the base was taken: it stopped cur only
	sh.mu.Unlock()
	if stopped {
		next.Stop()
	}
	return next, nil
}

// catchUp starts a follower on timeline from base's offset, waits until it has received the
// stream up to mark (read once it runs), then writes the base's description with that
// moment as servesFrom (and as the moment the timeline before was still followed, when it
// goes on until then: previousWhole), and returns the follower, running, with that moment.
// On an error the follower is stopped and the timeline's objects are deleted.
func (sh *shardArchive) catchUp(ctx context.Context, timeline int, base backup.Shard, mark func() (int64, error), previousWhole bool) (*runningFollower, time.Time, error) {
	_, conn := sh.current()
	f, err := redisarchive.NewFollower(redisarchive.Options{Conn: conn, Master: sh.address, Cluster: sh.cluster, Shard: sh.name,
		Timeline: timeline, From: redisarchive.Position{ReplID: base.ReplicationID, Offset: base.ReplicationOffset}, Sink: sh.sink})
	if err != nil {
		return nil, time.Time{}, errors.Join(err, redisarchive.DeleteTimeline(ctx, sh.sink, sh.cluster, sh.name, timeline))
	}
	next := startFollower(ctx, f)
	to, err := mark()
	if err == nil {
		err = waitCaughtUp(ctx, next, to)
	}
	servesFrom := time.Now()
	if err == nil {
		whole := time.Time{}
		if previousWhole {
			whole = servesFrom
		}
		err = sh.describeBase(ctx, timeline, base, servesFrom, whole)
	}
	if err != nil {
		if runErr := next.stopAndWait(); runErr != nil {
			err = fmt.Errorf("%w: %w", err, runErr)
		}
		return nil, time.Time{}, errors.Join(fmt.Errorf("timeline %d: %w", timeline, err), redisarchive.DeleteTimeline(ctx, sh.sink, sh.cluster, sh.name, timeline))
	}
	return next, servesFrom, nil
}

// archiveCatchUpMax bounds how long a scheduled base's follower may take to catch up with
// the current timeline's.
const archiveCatchUpMax = 2 * time.Minute

// waitCaughtUp waits until next has received the stream up to offset mark, or fails when
// its Run ends or archiveCatchUpMax passes.
func waitCaughtUp(ctx context.Context, next *runningFollower, mark int64) error {
	deadline := time.NewTimer(archiveCatchUpMax)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for next.Progress().Received < mark {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next.ended:
			return errors.New("its follower stopped before catching up")
		case <-deadline.C:
			return fmt.Errorf("its follower did not catch up with offset %d in %s (it is at %d)", mark, archiveCatchUpMax, next.Progress().Received)
		case <-tick.C:
		}
	}
	return nil
}

// prune deletes the shard's timelines spec.archive.retention no longer needs
// (redisarchive.Expired) and records its oldest timeline kept.
func (sh *shardArchive) prune(ctx context.Context) {
	sh.mu.Lock()
	keep := sh.schedule.retention
	sh.mu.Unlock()
	all, err := redisarchive.BaseTimelines(ctx, sh.sink, sh.cluster)
	if err != nil {
		sh.note(corev1.EventTypeWarning, ReasonArchivePruneFailed, "%s: cannot list the archive's timelines: %v", sh.name, err)
		return
	}
	gone := redisarchive.Expired(all, sh.name, time.Now(), keep)
	deleted := map[int]bool{}
	var names []string
	for _, tl := range gone {
		if err := redisarchive.DeleteTimeline(ctx, sh.sink, sh.cluster, sh.name, tl.Timeline); err != nil {
			sh.note(corev1.EventTypeWarning, ReasonArchivePruneFailed, "%s: %v", sh.name, err)
			break
		}
		deleted[tl.Timeline] = true
		names = append(names, strconv.Itoa(tl.Timeline))
	}
	if len(names) > 0 {
		sh.note(corev1.EventTypeNormal, ReasonArchivePruned, "%s: deleted timelines %s (spec.archive.retention %s: a restore to any later time needs none of them)",
			sh.name, strings.Join(names, ", "), keep)
	}
	for _, tl := range all { // by timeline: the first one left is the oldest
		if tl.Shard == sh.name && !deleted[tl.Timeline] {
			sh.mu.Lock()
			sh.oldest = tl.ServesFrom
			sh.mu.Unlock()
			return
		}
	}
}

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
