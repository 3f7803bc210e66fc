package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// RestoreMaxRecordFlag is the operator flag that sets RestoreMaxRecord.
const RestoreMaxRecordFlag = "restore-max-record"

// restoreShardTimeout bounds the load of one shard (its check and its load), which runs in
// the background (shardLoads): a step only starts it or collects its end.
const restoreShardTimeout = 30 * time.Minute

// The reasons of a restore's events.
const (
	ReasonRestoreFailed      = "RestoreFailed"
	ReasonRestoreShardLoaded = "RestoreShardLoaded"
	ReasonRestoreCompleted   = "RestoreCompleted"
)

// restoreSource is the backup a restoring cluster loads, as one reconcile read it.
type restoreSource struct {
	store    *objectstore.Client
	manifest *backup.Manifest
	location string
	// problem says why the restore cannot go on ("" when it can); refused that it is the
	// operator's EndpointPolicy, which no retry changes; storeFailed that the store's answer
	// or the manifest is the cause, which is read again after retryAt.
	problem     string
	refused     bool
	storeFailed bool
	retryAt     time.Time
	// archive is, for a restore from an archive, what each shard replays after its base
	// (nil for a backup).
	archive *archiveRestore
}

// readRestore reads, while the restore is not done, the backup spec.restore names: the
// RedisBackup (which must be Completed) or the source folder, then its manifest, and checks
// that the spec's Redis reads its files. What keeps it from going on is the problem, which
// the planner reports instead of forming the cluster.
func (r *RedisClusterReconciler) readRestore(ctx context.Context, s *state) error {
	if !resources.RedisRestoring(s.rc) {
		r.sources.forget(client.ObjectKeyFromObject(s.rc))
		return nil
	}
	spec := s.rc.Spec.Restore
	src, err := r.readSource(s, "restore", func() (*restoreSource, error) {
		switch {
		case spec.Archive != nil:
			return r.openArchive(ctx, s.rc, spec.Archive), nil
		case spec.Backup != "":
			return r.openBackup(ctx, s.rc, spec.Backup)
		}
		return r.openFolder(ctx, s.rc, "spec.restore.source.endpoint", *spec.Source, spec.Source.Path), nil
	})
	s.restore = src
	return err
}

// openBackup reads the manifest of the RedisBackup name of rc's namespace, which must be
// Completed; what keeps it from being read is the source's problem. An error is the API
// server's.
func (r *RedisClusterReconciler) openBackup(ctx context.Context, rc *redisv1alpha1.RedisCluster, name string) (*restoreSource, error) {
	b := &redisv1alpha1.RedisBackup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: name}, b)
	switch {
	case apierrors.IsNotFound(err):
		return &restoreSource{problem: fmt.Sprintf("RedisBackup %s does not exist in namespace %s: name a Completed RedisBackup, or the backup's folder in spec.restore.source", name, rc.Namespace)}, nil
	case err != nil:
		return nil, fmt.Errorf("while reading RedisBackup %s: %w", name, err)
	case b.Status.Phase != redisv1alpha1.BackupCompleted:
		return &restoreSource{problem: fmt.Sprintf("RedisBackup %s is %q, not Completed: only a completed backup is loaded", name, b.Status.Phase)}, nil
	}
	return r.openFolder(ctx, rc, "the spec.destination.endpoint of RedisBackup "+name, b.Spec.Destination, backupstore.Folder(b)), nil
}

// openFolder reads the manifest of the backup folder dir of store, whose endpoint is the
// field named field, and checks that rc's Redis reads its files.
func (r *RedisClusterReconciler) openFolder(ctx context.Context, rc *redisv1alpha1.RedisCluster, field string, store redisv1alpha1.ObjectStore, dir string) *restoreSource {
	src := &restoreSource{location: backupstore.Location(store, dir)}
	var err error
	if src.store, err = (backupstore.Opener{Reader: r.APIReader, Policy: r.StorePolicy}).Open(ctx, field, rc.Namespace, store, dir); err != nil {
		src.problem = err.Error()
		src.refused = errors.Is(err, backupstore.ErrEndpointRefused)
		return src
	}
	var buf bytes.Buffer
	if _, err := src.store.Get(ctx, backup.ManifestName, &buf, nil); err != nil {
		log.FromContext(ctx).Info("cannot read the backup's manifest", "location", src.location, "error", objectstore.Detail(err))
		src.problem, src.storeFailed = fmt.Sprintf("cannot read the backup's manifest at %s: %v", src.location, err), true
		return src
	}
	if src.manifest, err = backup.Parse(buf.Bytes()); err != nil {
		src.problem, src.storeFailed = fmt.Sprintf("the manifest at %s is not a backup this operator reads: %v", src.location, err), true
		return src
	}
	if reads, needs := resources.RedisRDBVersion(rc), src.manifest.RDBVersion(); reads > 0 && needs > reads {
		src.problem = fmt.Sprintf("the backup's files are RDB version %d (written by Redis %s), which the Redis of spec.version %s cannot read: "+
			"restore into the same Redis version or a later one", needs, src.manifest.RedisVersion, rc.Spec.Version)
	}
	return src
}

// plannerRestore is the restore in the planner's terms, nil when there is none to do.
func plannerRestore(s *state) *plan.Restore {
	if s.restore == nil {
		return nil
	}
	out := &plan.Restore{Problem: s.restore.problem}
	if s.rc.Status.Restore != nil {
		out.Loaded = s.rc.Status.Restore.LoadedShards
	}
	out.Shards = s.restore.shardSlots()
	return out
}

// shardSlots are the slot ranges of each shard of the backup, nil when it was not read.
func (src *restoreSource) shardSlots() [][]nodes.SlotRange {
	if src.manifest == nil {
		return nil
	}
	out := make([][]nodes.SlotRange, len(src.manifest.Shards))
	for i, sh := range src.manifest.Shards {
		out[i] = backupstore.Ranges(sh.Slots)
	}
	return out
}

// restoreShard starts the step's shard loads, each into its master, all at once in the
// background (runLoad), and records in the status every master whose load ended, and the
// restore's end. A shard that fails is tried again after its back-off; the others stay
// loaded.
func (r *RedisClusterReconciler) restoreShard(s *state) error {
	src := s.restore
	initRestoreStatus(s)
	st := s.next.Status.Restore
	var errs []error
	for _, load := range s.step.Loads {
		res, ended, err := r.runLoad(s, src, load, false, ReasonRestoreFailed, "Restore")
		switch {
		case err != nil:
			errs = append(errs, err)
			continue
		case !ended:
			continue
		}
		st.LoadedShards = append(st.LoadedShards, load.NodeID)
		st.Keys += res.Restored
		if src.archive != nil {
			r.recordReplay(s, src, load)
			continue
		}
		r.event(s, corev1.EventTypeNormal, ReasonRestoreShardLoaded, "Restore", "loaded %s of %d (slots %s, %d keys, captured at %s) into %s",
			nodes.ShardName(load.Shard), len(src.manifest.Shards), nodes.FormatSlotRanges(load.Slots), res.Restored,
			src.manifest.Shards[load.Shard].CapturedAt.Format(time.RFC3339), load.Pod)
	}
	if len(st.LoadedShards) == len(src.manifest.Shards) {
		now := metav1.Now()
		st.CompletedAt = &now
		if src.archive != nil {
			r.event(s, corev1.EventTypeNormal, ReasonRestoreCompleted, "Restore", "restored %d keys in %d shards from the archive %s to %s: %s",
				st.Keys, len(st.LoadedShards), src.location, st.Target, archiveReached(st.ArchiveShards))
			return errors.Join(errs...)
		}
		r.event(s, corev1.EventTypeNormal, ReasonRestoreCompleted, "Restore", "restored %d keys in %d shards from %s (backup completed at %s)",
			st.Keys, len(st.LoadedShards), src.location, src.manifest.CompletedAt.Format(time.RFC3339))
	}
	return errors.Join(errs...)
}

// loadShard loads a shard of src into the master node of rc, only the keys of the load's
// slots: it first reads the whole file once and checks its size and SHA-256 against the
// manifest, so a corrupted or truncated object loads nothing; then it streams the file
// again into the master as RESTOREs. From an archive, the load's slots are emptied first:
// a load tried again (after a failed replay, or by an operator restarted during one) would
// otherwise replay onto what the failed attempt applied, and count an INCR or an RPUSH of a
// key the base lacks twice. A restoring cluster admits no client (see ensureNetworkPolicy),
// so what is emptied is the failed attempt's alone. A reload of lost slots from the archive
// empties them only when retry says an attempt failed before, or was begun by another
// operator run (reloadLoadGate): the slots are served again
// meanwhile, and clients' new keys in them stay, as with a reload from a backup. With
// spec.acl, the emptying and the replay run as redisarchive.ReplayUser, made on the master
// for the load and switched off after it: the operator's own user may run none of the
// application's commands.
func (r *RedisClusterReconciler) loadShard(ctx context.Context, rc *redisv1alpha1.RedisCluster, node rdbstream.Options, src *restoreSource, step plan.ShardLoad, retry bool) (rdbload.Result, error) {
	if src.archive == nil {
		return r.loadShardFile(ctx, rc, node, src, step)
	}
	replay := node
	if resources.RedisACLEnabled(rc) {
		var done func(context.Context) error
		var err error
		if replay, done, err = redisarchive.WithReplayUser(ctx, node); err != nil {
			return rdbload.Result{}, fmt.Errorf("before replaying %s onto %s: %w", nodes.ShardName(step.Shard), step.Pod, err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := done(ctx); err != nil {
				log.FromContext(ctx).Info("cannot switch the replay user off", "cluster", rc.Name, "pod", step.Pod, "error", err)
			}
		}()
	}
	if !src.archive.reload || retry {
		if _, err := rdbload.ClearSlots(ctx, replay, loadSlots(step)); err != nil {
			return rdbload.Result{}, fmt.Errorf("while emptying the slots of %s on %s before its load: %w", nodes.ShardName(step.Shard), step.Pod, err)
		}
	}
	res, err := r.loadShardFile(ctx, rc, node, src, step)
	if err != nil {
		return res, err
	}
	return res, r.replayShard(ctx, rc, replay, src, step)
}

// loadShardFile loads the keys of the step's slots from the shard's file into node.
func (r *RedisClusterReconciler) loadShardFile(ctx context.Context, rc *redisv1alpha1.RedisCluster, node rdbstream.Options, src *restoreSource, step plan.ShardLoad) (rdbload.Result, error) {
	sh := src.manifest.Shards[step.Shard]
	want := &objectstore.Digest{Size: sh.Bytes, SHA256: sh.SHA256}
	if _, err := src.store.Get(ctx, sh.File, io.Discard, want); err != nil {
		log.FromContext(ctx).Info("cannot read a shard's file", "cluster", rc.Name, "shard", step.Shard, "error", objectstore.Detail(err))
		return rdbload.Result{}, fmt.Errorf("%s's file %s at %s: %w", nodes.ShardName(step.Shard), sh.File, src.location, err)
	}
	pr, pw := io.Pipe()
	got := make(chan error, 1)
	go func() {
		_, err := src.store.Get(ctx, sh.File, pw, want)
		_ = pw.CloseWithError(err)
		got <- err
	}()
	res, err := rdbload.Load(ctx, rdbload.Options{Node: node, Slots: loadSlots(step), MaxRecord: r.RestoreMaxRecord}, pr)
	_ = pr.CloseWithError(errors.New("the load ended"))
	if getErr := <-got; err == nil && getErr != nil {
		err = getErr
	}
	if errors.Is(err, rdbload.ErrTooLarge) {
		err = fmt.Errorf("%w (the operator's --%s raises the limit, within its memory limit)", err, RestoreMaxRecordFlag)
	}
	if err != nil {
		return res, fmt.Errorf("while loading %s into %s: %w", nodes.ShardName(step.Shard), step.Pod, err)
	}
	return res, nil
}

// loadSlots are the step's slots in rdbload's terms.
func loadSlots(step plan.ShardLoad) []rdbload.SlotRange {
	slots := make([]rdbload.SlotRange, len(step.Slots))
	for i, rg := range step.Slots {
		slots[i] = rdbload.SlotRange{From: rg.Start, To: rg.End}
	}
	return slots
}

// initRestoreStatus starts the restore's status once its backup is read.
func initRestoreStatus(s *state) {
	if s.restore == nil || s.restore.manifest == nil || s.next.Status.Restore != nil {
		return
	}
	completed := metav1.NewTime(s.restore.manifest.CompletedAt)
	s.next.Status.Restore = &redisv1alpha1.RestoreStatus{Location: s.restore.location, BackupCompletedAt: &completed,
		Shards: int32(len(s.restore.manifest.Shards))} //nolint:gosec // a manifest has at most 16384 shards
	if s.restore.archive != nil {
		s.next.Status.Restore.Target = s.restore.archive.targetText
	}
}

// restoreProgress says what a restore still has to do, "" once it is done (or there is none).
func restoreProgress(s *state) string {
	if s.rc.Spec.Restore == nil {
		return ""
	}
	st := s.next.Status.Restore
	switch {
	case st != nil && st.CompletedAt != nil:
		return ""
	case st == nil && s.rc.Spec.Restore.Archive != nil:
		return "restoring from the archive of " + s.rc.Spec.Restore.Archive.Cluster + ": its bases are not read yet"
	case st == nil:
		return "restoring from a backup: its manifest is not read yet"
	}
	return fmt.Sprintf("restoring from %s: %d of %d shards loaded", st.Location, len(st.LoadedShards), st.Shards)
}

// restoreSources keeps, per cluster, the backup it restores or reloads from as last read,
// so that its manifest is read from the store once, not at every look; a read that failed
// on the store (or on the manifest's content) is read again only after its back-off.
type restoreSources struct {
	mu sync.Mutex
	m  map[backupstore.FailureKey]*restoreSource
}

// get returns the source kept for k, nil when there is none (or its back-off is over).
func (c *restoreSources) get(k backupstore.FailureKey) *restoreSource {
	c.mu.Lock()
	defer c.mu.Unlock()
	src := c.m[k]
	if src != nil && !src.retryAt.IsZero() && !time.Now().Before(src.retryAt) {
		delete(c.m, k)
		return nil
	}
	return src
}

// keep keeps src for k.
func (c *restoreSources) keep(k backupstore.FailureKey, src *restoreSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[backupstore.FailureKey]*restoreSource{}
	}
	c.m[k] = src
}

// drop drops the source kept for k.
func (c *restoreSources) drop(k backupstore.FailureKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// forget drops what is kept of cluster's sources.
func (c *restoreSources) forget(cluster types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	backupstore.DeleteObject(c.m, cluster)
}

// readSource returns the source of what (a restore or a reload) of s's cluster kept from an
// earlier look, or reads it with read and keeps it: a source whose manifest was read until
// the cluster forgets it, one whose endpoint the operator refuses for good, one whose store read failed
// for its back-off. A problem is reported once in a Warning event.
func (r *RedisClusterReconciler) readSource(s *state, what string, read func() (*restoreSource, error)) (*restoreSource, error) {
	k := backupstore.FailureKey{Object: client.ObjectKeyFromObject(s.rc), What: what}
	if src := r.sources.get(k); src != nil {
		return src, nil
	}
	src, err := read()
	if err != nil || src == nil {
		return src, err
	}
	switch {
	case src.manifest != nil:
		r.storeFailures.Succeeded(k)
		r.sources.keep(k, src)
	case src.refused:
		if _, distinct := r.storeFailures.Fail(k, src.problem, time.Now()); distinct {
			r.event(s, corev1.EventTypeWarning, backupstore.ReasonEndpointRefused, "Restore", "%s", src.problem)
		}
		r.sources.keep(k, src)
	case src.storeFailed:
		wait, distinct := r.storeFailures.Fail(k, src.problem, time.Now())
		if distinct {
			r.event(s, corev1.EventTypeWarning, ReasonRestoreFailed, "Restore", "%s; tried again in %s, then less and less often", src.problem, wait)
		}
		src.retryAt = time.Now().Add(wait)
		r.sources.keep(k, src)
	}
	return src, nil
}
