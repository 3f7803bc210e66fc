// Package restore reads the backup or archive a RedisCluster restores or reloads lost slots
// from (Opener, kept per cluster by Sources), and loads its shards into the masters (Job),
// each in the background of the reconcile workers (Loads). What the reconciler decides
// about a restore, and what it reports, stays with it: this package only reads and loads.
package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// TargetLatest is the spec.restore.archive.targetTime that restores everything archived.
const TargetLatest = "latest"

// Source is the backup a restoring cluster loads (or a reload reloads lost slots from), as
// one read of it found it.
type Source struct {
	// Manifest is the backup's manifest, nil when it could not be read.
	Manifest *backup.Manifest
	// Location names the backup's folder for events and the status.
	Location string
	// Problem says why the restore cannot go on ("" when it can); Refused that it is the
	// operator's EndpointPolicy, which no retry changes; StoreFailed that the store's answer
	// or the manifest is the cause, which is read again after its back-off (Sources).
	Problem     string
	Refused     bool
	StoreFailed bool
	// Archive is, for a restore from an archive, what each shard replays after its base
	// (nil for a backup).
	Archive *Archive

	store   *objectstore.Client
	retryAt time.Time
}

// Archive is what a restore from an archive replays: for each shard of the source's
// manifest (in its order), the timeline whose base it loads. For a reload of lost slots
// (Reload), each replay is kept to the slots it reloads.
type Archive struct {
	// Cluster is the archived cluster's name.
	Cluster string
	// Target is the time replays stop at (zero: the latest), TargetText as the user wrote it.
	Target     time.Time
	TargetText string
	// Timelines are the chosen timelines, one per shard of the manifest.
	Timelines []redisarchive.Timeline
	// Reload: a reload of lost slots, not a restore.
	Reload bool
}

// ShardSlots are the slot ranges of each shard of the backup, nil when it was not read.
func (src *Source) ShardSlots() [][]nodes.SlotRange {
	if src.Manifest == nil {
		return nil
	}
	out := make([][]nodes.SlotRange, len(src.Manifest.Shards))
	for i, sh := range src.Manifest.Shards {
		out[i] = backupstore.Ranges(sh.Slots)
	}
	return out
}

// Opener reads sources: RedisBackups through Objects, the stores' credentials through
// Secrets, the endpoints allowed by Policy.
type Opener struct {
	Objects client.Reader
	Secrets client.Reader
	Policy  objectstore.EndpointPolicy
}

// Backup reads the manifest of the RedisBackup name of rc's namespace, which must be
// Completed; what keeps it from being read is the source's problem. An error is the API
// server's.
func (o Opener) Backup(ctx context.Context, rc *redisv1alpha1.RedisCluster, name string) (*Source, error) {
	b := &redisv1alpha1.RedisBackup{}
	err := o.Objects.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: name}, b)
	switch {
	case apierrors.IsNotFound(err):
		return &Source{Problem: fmt.Sprintf("RedisBackup %s does not exist in namespace %s: name a Completed RedisBackup, or the backup's folder in spec.restore.source", name, rc.Namespace)}, nil
	case err != nil:
		return nil, fmt.Errorf("while reading RedisBackup %s: %w", name, err)
	case b.Status.Phase != redisv1alpha1.BackupCompleted:
		return &Source{Problem: fmt.Sprintf("RedisBackup %s is %q, not Completed: only a completed backup is loaded", name, b.Status.Phase)}, nil
	}
	return o.Folder(ctx, rc, "the spec.destination.endpoint of RedisBackup "+name, b.Spec.Destination, backupstore.Folder(b)), nil
}

// Folder reads the manifest of the backup folder dir of store, whose endpoint is the field
// named field, and checks that rc's Redis reads its files.
func (o Opener) Folder(ctx context.Context, rc *redisv1alpha1.RedisCluster, field string, store redisv1alpha1.ObjectStore, dir string) *Source {
	src := &Source{Location: backupstore.Location(store, dir)}
	if !o.open(ctx, src, rc.Namespace, field, store, dir) {
		return src
	}
	var buf bytes.Buffer
	if _, err := src.store.Get(ctx, backup.ManifestName, &buf, nil); err != nil {
		log.FromContext(ctx).Info("cannot read the backup's manifest", "location", src.Location, "error", objectstore.Detail(err))
		src.Problem, src.StoreFailed = fmt.Sprintf("cannot read the backup's manifest at %s: %v", src.Location, err), true
		return src
	}
	var err error
	if src.Manifest, err = backup.Parse(buf.Bytes()); err != nil {
		src.Problem, src.StoreFailed = fmt.Sprintf("the manifest at %s is not a backup this operator reads: %v", src.Location, err), true
		return src
	}
	if needs := tooNew(rc, src.Manifest); needs > 0 {
		src.Problem = fmt.Sprintf("the backup's files are RDB version %d (written by Redis %s), which the Redis of spec.version %s cannot read: "+
			"restore into the same Redis version or a later one", needs, src.Manifest.RedisVersion, rc.Spec.Version)
	}
	return src
}

// open opens the store of src (dir of store, in namespace, its endpoint the field named
// field); false, with src's problem said, when it cannot.
func (o Opener) open(ctx context.Context, src *Source, namespace, field string, store redisv1alpha1.ObjectStore, dir string) bool {
	var err error
	if src.store, err = (backupstore.Opener{Reader: o.Secrets, Policy: o.Policy}).Open(ctx, field, namespace, store, dir); err != nil {
		src.Problem = err.Error()
		src.Refused = errors.Is(err, backupstore.ErrEndpointRefused)
		return false
	}
	return true
}

// ParseTarget reads spec.restore.archive.targetTime: zero for latest.
func ParseTarget(text string) (time.Time, error) {
	if text == TargetLatest {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return t, fmt.Errorf("spec.restore.archive.targetTime %q is not an RFC 3339 time (%w): write it as 2026-11-28T23:15:00Z, or latest", text, err)
	}
	return t, nil
}

// Archive reads the archive spec names: its bases, the timeline of each shard for the
// target, and makes of them the manifest the restore loads (the bases' snapshots are its
// shards' files).
func (o Opener) Archive(ctx context.Context, rc *redisv1alpha1.RedisCluster, spec *redisv1alpha1.ArchiveRestoreSpec) *Source {
	target, err := ParseTarget(spec.TargetTime)
	if err != nil {
		return &Source{Problem: err.Error()}
	}
	return o.ArchiveAt(ctx, rc, "spec.restore.archive.source.endpoint", spec.Source, spec.Cluster, time.Time{}, target, spec.TargetTime, false)
}

// ArchiveFolder is where a cluster's archive goes in its destination's bucket: the
// destination's path, the cluster's namespace when empty (the archive is the folder
// <cluster>/archive under it).
func ArchiveFolder(namespace string, dest redisv1alpha1.ObjectStore) string {
	if dir := strings.Trim(dest.Path, "/"); dir != "" {
		return dir
	}
	return namespace
}

// ArchiveAt reads the archive of cluster at source for target (zero: the latest): its
// bases, the timeline of each shard, and makes of them the manifest the load reads (the
// bases' snapshots are its shards' files); each is replayed up to target. For a reload, the
// timelines are those that served at lostAt (redisarchive.ChooseReloadTimelines), and one
// that ended before target is what there is (the lost shard's archive ends at the loss), so
// coverage is not checked.
func (o Opener) ArchiveAt(ctx context.Context, rc *redisv1alpha1.RedisCluster, field string, source redisv1alpha1.ObjectStore, cluster string,
	lostAt, target time.Time, targetText string, reload bool) *Source {
	dir := ArchiveFolder(rc.Namespace, source)
	src := &Source{Location: backupstore.Location(source, path.Join(dir, cluster, "archive"))}
	if !o.open(ctx, src, rc.Namespace, field, source, dir) {
		return src
	}
	sink := redisarchive.StoreSink{Client: src.store}
	all, err := redisarchive.BaseTimelines(ctx, sink, cluster)
	if err != nil {
		log.FromContext(ctx).Info("cannot read the archive", "location", src.Location, "error", objectstore.Detail(err))
		src.Problem, src.StoreFailed = fmt.Sprintf("cannot read the archive at %s: %v", src.Location, err), true
		return src
	}
	var chosen []redisarchive.Timeline
	if reload {
		chosen, err = redisarchive.ChooseReloadTimelines(all, lostAt, target)
	} else {
		chosen, err = redisarchive.ChooseTimelines(all, target)
	}
	if err != nil {
		src.Problem, src.StoreFailed = fmt.Sprintf("the archive at %s: %v", src.Location, err), true
		return src
	}
	if !reload {
		if problem, err := uncoveredTarget(ctx, sink, cluster, chosen, target); err != nil || problem != "" {
			if err != nil {
				problem = fmt.Sprintf("cannot read the archive at %s: %v", src.Location, err)
			}
			src.Problem, src.StoreFailed = problem, true
			return src
		}
	}
	slices.SortFunc(chosen, func(a, b redisarchive.Timeline) int { return a.Base.Slots[0].Start - b.Base.Slots[0].Start })
	m := &backup.Manifest{Kind: backup.Kind, FormatVersion: backup.FormatVersion, Cluster: backup.ClusterRef{Namespace: dir, Name: cluster}}
	for _, tl := range chosen {
		m.Shards = append(m.Shards, tl.Base)
		if m.StartedAt.IsZero() || tl.Base.CapturedAt.Before(m.StartedAt) {
			m.StartedAt = tl.Base.CapturedAt
		}
		if tl.Base.CapturedAt.After(m.CompletedAt) {
			m.CompletedAt = tl.Base.CapturedAt
		}
	}
	if err := m.Validate(); err != nil {
		// Each shard whose slots changed started a timeline of its own from a base of its
		// own; at a time between a migration and those bases, the timelines that serve it
		// hold the slots of different moments.
		src.Problem, src.StoreFailed = fmt.Sprintf("the archive's bases at %s that serve %s do not make a whole cluster (%s): %s",
			src.Location, targetText, strings.ReplaceAll(err.Error(), "\n", "; "), migrationInWindow), true
		return src
	}
	src.Manifest = m
	src.Archive = &Archive{Cluster: cluster, Target: target, TargetText: targetText, Timelines: chosen, Reload: reload}
	if needs := tooNew(rc, m); needs > 0 {
		src.Problem = fmt.Sprintf("the archive's bases are RDB version %d, which the Redis of spec.version %s cannot read: restore into the same Redis version or a later one",
			needs, rc.Spec.Version)
	}
	return src
}

// tooNew is the RDB version m's files are written in when rc's Redis cannot read it, 0
// when it can (or either version is unknown).
func tooNew(rc *redisv1alpha1.RedisCluster, m *backup.Manifest) int {
	if reads, needs := resources.RedisRDBVersion(rc), m.RDBVersion(); reads > 0 && needs > reads {
		return needs
	}
	return 0
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

// migrationInWindow is the cause and the fix a restore from an archive names when slots
// migrated between shards inside its window: the archive replays a shard's history onto the
// slots of its base, and a migration's DELs in one shard and RESTOREs in another cannot be
// ordered against each other.
const migrationInWindow = "slots migrated inside the restore window, which a restore cannot replay; restore to a time before the migration, " +
	"or to one after the timelines that started with the new slot map serve (the source's status.archive.shards[].baseCapturedAt), or to latest"
