package redisbackup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// backupCopyTimeout bounds one attempt's copy of every shard.
const backupCopyTimeout = 30 * time.Minute

// backupDone is a finished copy: its manifest, as written to the store, and the pod each
// shard was copied from.
type backupDone struct {
	manifest *backup.Manifest
	pods     []string
	// shards is how long the shards took to stream, and check how long the slot map's
	// second look and the manifest's upload took after them.
	shards, check time.Duration
}

// apply records the manifest in a backup's status.
func (d backupDone) apply(st *redisv1alpha1.RedisBackupStatus) {
	m := d.manifest
	st.RedisVersion, st.Keys, st.Bytes = m.RedisVersion, m.Keys(), m.Bytes()
	completed := metav1.NewTime(m.CompletedAt)
	st.CompletedAt = &completed
	st.Shards = make([]redisv1alpha1.BackupShard, len(m.Shards))
	for i, sh := range m.Shards {
		captured := metav1.NewTime(sh.CapturedAt)
		st.Shards[i] = redisv1alpha1.BackupShard{
			Slots: nodes.FormatSlotRanges(backupstore.Ranges(sh.Slots)), MasterNodeID: sh.MasterNodeID, Source: d.pods[i], SourceRole: string(sh.SourceRole),
			ReplicationOffset: sh.ReplicationOffset, File: sh.File, Keys: sh.Keys, Bytes: sh.Bytes, SHA256: sh.SHA256,
		}
		if !sh.CapturedAt.IsZero() {
			st.Shards[i].CapturedAt = &captured
		}
	}
}

// copy streams every shard from its source to the store (all at once, copyShards), checks that
// the slot map did not change meanwhile, and writes the manifest last: a folder without a
// manifest is not a backup.
func (r *RedisBackupReconciler) copy(ctx context.Context, run backupRun) (backupDone, error) {
	ctx, cancel := context.WithTimeout(ctx, backupCopyTimeout)
	defer cancel()
	m := &backup.Manifest{Kind: backup.Kind, FormatVersion: backup.FormatVersion, StartedAt: time.Now().UTC(),
		Cluster: backup.ClusterRef{Namespace: run.rc.Namespace, Name: run.rc.Name, UID: string(run.rc.UID)}}
	shards, err := copyShards(ctx, run)
	if err != nil {
		return backupDone{}, err
	}
	copied := time.Now()
	var pods []string
	for i, src := range run.source {
		m.RedisVersion = shards[i].RedisVersion
		m.Shards = append(m.Shards, backupstore.ShardEntry(src, shards[i], backup.ShardFile(i)))
		pods = append(pods, src.Pod)
	}
	after, _, err := r.sources(ctx, run.rc, run.conn)
	switch {
	case err != nil:
		return backupDone{}, fmt.Errorf("after copying the shards: %w", err)
	case !after.Equal(run.slots):
		return backupDone{}, fmt.Errorf("the slot map changed during the backup (%s, then %s): the files may not match it", run.slots, after)
	}
	m.CompletedAt = time.Now().UTC()
	data, err := m.Marshal()
	if err != nil {
		return backupDone{}, fmt.Errorf("the manifest: %w", err)
	}
	if _, err := run.store.Put(ctx, backup.ManifestName, bytes.NewReader(data), int64(len(data))); err != nil {
		return backupDone{}, fmt.Errorf("while writing the manifest: %w", err)
	}
	return backupDone{manifest: m, pods: pods, shards: copied.Sub(m.StartedAt), check: time.Since(copied)}, nil
}

// copyShards streams every shard at once, each from its source to its file, the source
// writing its snapshot to its disk first (rdbstream.Options.ViaDisk) so that nothing waits
// for repl-diskless-sync-delay. The first failure cancels the others.
func copyShards(ctx context.Context, run backupRun) ([]rdbstream.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]rdbstream.Result, len(run.source))
	errs := make([]error, len(run.source))
	var wg sync.WaitGroup
	for i, src := range run.source {
		wg.Go(func() {
			// Via disk: the node starts at once instead of waiting repl-diskless-sync-delay
			// for replicas a backup never brings; it needs the room of one snapshot, which
			// a BGSAVE needs too.
			opts := rdbstream.Options{Addr: src.Addr, Username: run.conn.Login.User, Password: run.conn.Login.Password, TLS: run.conn.TLS, ViaDisk: true}
			res, _, err := backup.StreamShard(ctx, opts, run.store, backup.ShardFile(i))
			if err != nil {
				errs[i] = fmt.Errorf("%s (slots %s, from %s): %w", nodes.ShardName(i), nodes.FormatSlotRanges(src.Slots), src.Pod, err)
				cancel()
			}
			results[i] = res
		})
	}
	wg.Wait()
	for _, err := range errs {
		// The first shard that failed by itself, not one the failure cancelled.
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	return results, errors.Join(errs...)
}
