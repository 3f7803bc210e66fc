package backup_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testmem"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
	"github.com/middleware-operator/middleware-operator/tests/teststore"
)

// startStore starts the local cluster's object store on its own, with TLS.
func startStore(t testing.TB) (*localcluster.ObjectStore, *objectstore.Client) {
	t.Helper()
	return teststore.Start(t, "shop/cache")
}

// TestBackupAndRestoreOneShard runs the ground work end to end: a cluster-mode node's
// snapshot streams into the object store, a manifest records it, and a restore reads the
// manifest, downloads the file checking its size and SHA-256, and a fresh redis-server
// loads it with every key. A corrupted object is then refused.
func TestBackupAndRestoreOneShard(t *testing.T) {
	store, client := startStore(t)
	node := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{})
	data := testredis.Dataset{Strings: 30_000, Others: 300}
	data.Write(t, node.Client)
	ctx := t.Context()
	myID, err := node.Client.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}

	started := time.Now().UTC().Truncate(time.Second)
	dir := "2026-11-26T100000Z"
	res, obj, err := backup.StreamShard(ctx, rdbstream.Options{Addr: node.Addr}, client, dir+"/"+backup.ShardFile(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("streamed %d bytes, %d keys, from %s to %s in %s", obj.Size, res.Keys, node.Addr, obj.Key, time.Since(started).Round(time.Millisecond))
	m := &backup.Manifest{
		Kind: backup.Kind, FormatVersion: backup.FormatVersion,
		Cluster:      backup.ClusterRef{Namespace: "shop", Name: "cache"},
		RedisVersion: res.RedisVersion, StartedAt: started, CompletedAt: time.Now().UTC().Truncate(time.Second).Add(time.Second),
		Shards: []backup.Shard{{
			Slots: []backup.SlotRange{{Start: 0, End: 16383}}, MasterNodeID: myID, SourceNodeID: myID, SourceRole: backup.RoleMaster,
			ReplicationID: res.ReplID, ReplicationOffset: res.Offset, CapturedAt: res.Created, File: backup.ShardFile(0),
			Bytes: obj.Size, SHA256: obj.SHA256, RDBVersion: res.RDBVersion, Keys: res.Keys, KeysWithTTL: res.Expires,
		}},
	}
	manifest, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(ctx, dir+"/"+backup.ManifestName, bytes.NewReader(manifest), int64(len(manifest))); err != nil {
		t.Fatal(err)
	}

	restore := func() (*backup.Manifest, string, error) {
		var buf bytes.Buffer
		if _, err := client.Get(ctx, dir+"/"+backup.ManifestName, &buf, nil); err != nil {
			return nil, "", err
		}
		m, err := backup.Parse(buf.Bytes())
		if err != nil {
			return nil, "", err
		}
		shard := m.Shards[m.ShardOf(0)]
		out := t.TempDir()
		f, err := os.Create(filepath.Join(out, "dump.rdb"))
		if err != nil {
			return nil, "", err
		}
		defer func() { _ = f.Close() }()
		_, err = client.Get(ctx, dir+"/"+shard.File, f, &objectstore.Digest{Size: shard.Bytes, SHA256: shard.SHA256})
		return m, out, err
	}
	back, out, err := restore()
	if err != nil {
		t.Fatal(err)
	}
	if back.Shards[0].Keys != int64(data.Keys()) || back.Shards[0].KeysWithTTL != int64(data.Others) {
		t.Fatalf("the manifest records %d keys (%d with a TTL), want %d (%d)", back.Shards[0].Keys, back.Shards[0].KeysWithTTL, data.Keys(), data.Others)
	}
	data.Check(t, testredis.Restore(t, out))

	path := filepath.Join(store.DataDir, store.Bucket, obj.Key)
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	onDisk[len(onDisk)/2] ^= 1
	if err := os.WriteFile(path, onDisk, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := restore(); !errors.Is(err, objectstore.ErrChecksum) {
		t.Fatalf("restoring a corrupted file: %v, want ErrChecksum", err)
	}
}

// TestStreamShardFailures: a store that refuses stops the transfer from the node, a node
// that refuses leaves no object, and a transfer cut mid-way leaves none either.
func TestStreamShardFailures(t *testing.T) {
	store, client := startStore(t)
	ctx := t.Context()
	// 20,000 keys written 100 µs apart: a snapshot of 2 s, streamed as it is written.
	node := testredis.Start(t, t.TempDir(), goredis.Options{Password: "pw"}, "--requirepass", "pw",
		"--repl-diskless-sync", "yes", "--rdb-key-save-delay", "100")
	testredis.Dataset{Strings: 20_000}.Write(t, node.Client)
	t.Run("wrong credentials for the store", func(t *testing.T) {
		cfg := store.Config()
		cfg.SecretKey += "x"
		cfg.MaxRetries = -1
		bad, err := objectstore.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, _, err = backup.StreamShard(ctx, rdbstream.Options{Addr: node.Addr, Password: "pw"}, bad, "x/shard-000.rdb")
		if !errors.Is(err, objectstore.ErrAccessDenied) {
			t.Fatalf("error %v, want ErrAccessDenied", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("the failed upload took %s: the transfer from the node went on", took)
		}
		t.Log(err)
	})
	t.Run("wrong password for the node", func(t *testing.T) {
		_, _, err := backup.StreamShard(ctx, rdbstream.Options{Addr: node.Addr, Password: "nope"}, client, "x/shard-000.rdb")
		if !errors.Is(err, rdbstream.ErrAuth) {
			t.Fatalf("error %v, want ErrAuth", err)
		}
		t.Log(err)
		assertNoObjects(t, client)
	})
	t.Run("the node drops the transfer", func(t *testing.T) {
		go func() {
			time.Sleep(700 * time.Millisecond)
			_ = node.Client.Do(context.WithoutCancel(ctx), "CLIENT", "KILL", "TYPE", "replica").Err()
		}()
		_, _, err := backup.StreamShard(ctx, rdbstream.Options{Addr: node.Addr, Password: "pw"}, client, "x/shard-000.rdb")
		if !errors.Is(err, rdbstream.ErrInvalid) {
			t.Fatalf("error %v, want ErrInvalid (cut short)", err)
		}
		t.Log(err)
		assertNoObjects(t, client)
	})
}

func assertNoObjects(t *testing.T, client *objectstore.Client) {
	t.Helper()
	if list, err := client.List(t.Context(), ""); err != nil || len(list) != 0 {
		t.Fatalf("the bucket holds %v (%v), want nothing", list, err)
	}
}

// TestStreamShardMemory streams a snapshot of about 40 MB and samples the heap: it must stay
// within a few upload parts, whatever the snapshot's size.
func TestStreamShardMemory(t *testing.T) {
	_, client := startStore(t)
	node := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{ReadTimeout: time.Minute}, "--enable-debug-command", "yes")
	ctx := t.Context()
	const keys = 1_200_000
	if err := node.Client.Do(ctx, "DEBUG", "POPULATE", keys, "key", 100).Err(); err != nil {
		t.Fatal(err)
	}
	var (
		res  rdbstream.Result
		obj  objectstore.Object
		err  error
		took time.Duration
	)
	grew := testmem.HeapGrowth(func() {
		start := time.Now()
		res, obj, err = backup.StreamShard(ctx, rdbstream.Options{Addr: node.Addr}, client, "big/shard-000.rdb")
		took = time.Since(start)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys, %d MB in %s (%.0f MB/s); the heap grew by at most %d MiB", res.Keys, obj.Size>>20, took.Round(time.Millisecond),
		float64(obj.Size)/took.Seconds()/1e6, grew>>20)
	if res.Keys != keys {
		t.Fatalf("the snapshot has %d keys, want %d", res.Keys, keys)
	}
	if limit := int64(4 * objectstore.DefaultPartSize); grew > limit {
		t.Fatalf("the heap grew by %d MiB for a %d MiB snapshot; want at most %d MiB", grew>>20, obj.Size>>20, limit>>20)
	}
}
