package redis_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/controllers/redisbackup"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/restore"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
	"github.com/middleware-operator/middleware-operator/tests/teststore"
)

// TestRestoreOfACorruptedObjectBacksOff: a restore whose shard file is corrupted reads that
// file from the store a handful of times in a minute (back-off 5 s, 10 s, 20 s, 40 s: 4
// reads), not 8 times a second, and says so in one Warning event, not one per try; each
// whole shard's file is read once (streamed into its master, its checksum checked at its
// end). The store's requests are counted by a proxy in front of it.
func TestRestoreOfACorruptedObjectBacksOff(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	proxy, corruptedFile, wholeFiles := restoreAlteredShard(t, ns, "from-corrupted", func(data []byte) { data[len(data)/2] ^= 0xff }, false)
	testenv.Eventually(t, 3*time.Minute, func(context.Context) (bool, string) {
		n := proxy.Requests("GET", "/"+corruptedFile)
		return n > 0, fmt.Sprintf("%d reads of %s", n, corruptedFile)
	})
	first := time.Now()
	time.Sleep(60 * time.Second)
	reads, all := proxy.Requests("GET", "/"+corruptedFile), proxy.Requests("", "")
	failures := restoreFailures(t, ns, "from-corrupted")
	t.Logf("in the 60 s after its first read: %d reads of the corrupted file, %d requests to the store in all, %d %s events",
		reads, all, len(failures), report.ReasonRestoreFailed)
	if reads > 5 {
		t.Errorf("the corrupted file was read %d times in %s, want at most 5 (a back-off of 5 s doubling)", reads, time.Since(first).Round(time.Second))
	}
	if all > 14 {
		t.Errorf("%d requests to the store, want at most 14 (the manifest, one read of each whole shard, the corrupted one's tries)", all)
	}
	for _, f := range wholeFiles {
		if n := proxy.Requests("GET", "/"+f); n != 1 {
			t.Errorf("the whole shard file %s was read %d times, want once", f, n)
		}
	}
	if len(failures) != 1 {
		t.Errorf("%d %s events, want one for one failure; the first: %q", len(failures), report.ReasonRestoreFailed, failures[:min(len(failures), 2)])
	}
}

// TestRestoreOfAHostileRDBFailsNamingTheCause: a shard file rewritten by whoever controls
// the store, its first key claiming a 4 GiB value, ends the restore in RestoreFailed naming
// the cause ("RDB record too large") and the flag that raises the limit, before anything is
// buffered for it: the shared operator answers the other tenants' clusters meanwhile.
func TestRestoreOfAHostileRDBFailsNamingTheCause(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	restoreAlteredShard(t, ns, "from-hostile", func(data []byte) {
		// After the 9-byte header "REDIS00nn": a string (type 0), the key "k", then a
		// 32-bit length claim of 0xfffffff0 bytes (0x80 and four bytes, big-endian).
		copy(data[9:], []byte{0, 1, 'k', 0x80, 0xff, 0xff, 0xff, 0xf0})
	}, true)
	testenv.Eventually(t, 3*time.Minute, func(context.Context) (bool, string) {
		failures := restoreFailures(t, ns, "from-hostile")
		for _, f := range failures {
			if strings.Contains(f, "RDB record too large") && strings.Contains(f, "--"+restore.MaxRecordFlag) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("RestoreFailed events %q, want one naming the record too large and --%s", failures, restore.MaxRecordFlag)
	})
}

// restoreAlteredShard backs up a cluster of 6 nodes in ns, alters the second shard's file in
// the store in place (alter gets its bytes), and creates the RedisCluster name restoring
// that backup through a counting proxy in front of the store. It returns the proxy, the
// altered file's name and the other shards' files. With rewriteManifest the backup's manifest is given the altered file's
// checksum, as whoever controls the store could.
func restoreAlteredShard(t *testing.T, ns, name string, alter func([]byte), rewriteManifest bool) (proxy *teststore.Counting, altered string, whole []string) {
	t.Helper()
	createStoreSecrets(t, ns, store.SecretKey)
	createRunning(t, redistest.NewCluster(ns, "whole", 6), "")
	b := waitBackup(t, createBackup(t, ns, "snap", "whole", storeSpec(store.Bucket)), redisv1alpha1.BackupCompleted, redisbackup.ReasonBackupCompleted, 2*time.Minute)
	folder := strings.TrimPrefix(b.Status.Location, "s3://"+store.Bucket+"/")
	file := b.Status.Shards[1].File
	path := store.DataDir + "/" + store.Bucket + "/" + folder + "/" + file
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Clone(data)
	alter(data)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if rewriteManifest {
		// Whoever controls the store controls the manifest too: the altered file's checksum.
		manifest := store.DataDir + "/" + store.Bucket + "/" + folder + "/" + backup.ManifestName
		m, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m = bytes.ReplaceAll(m, []byte(b.Status.Shards[1].SHA256), []byte(hex.EncodeToString(sum[:])))
		if err := os.WriteFile(manifest, m, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	proxy = teststore.Count(t, store)
	if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxy-ca"},
		Data: map[string][]byte{backupstore.StoreCAKey: proxy.CA}}); err != nil {
		t.Fatal(err)
	}
	restored := redistest.NewCluster(ns, name, 6)
	restored.Spec.Restore = &redisv1alpha1.RestoreSpec{Source: &redisv1alpha1.ObjectStore{Endpoint: proxy.Endpoint, Bucket: store.Bucket,
		Region: store.Region, Path: folder, CredentialsSecret: storeCredentials, CASecret: "proxy-ca"}}
	if err := env.Client.Create(t.Context(), restored); err != nil {
		t.Fatal(err)
	}
	for i, sh := range b.Status.Shards {
		if i != 1 {
			whole = append(whole, sh.File)
		}
	}
	return proxy, file, whole
}

// restoreFailures are the messages of the RestoreFailed events of the cluster name in ns
// (counting an event's repeats).
func restoreFailures(t *testing.T, ns, name string) []string {
	t.Helper()
	var out []string
	for _, e := range eventsAbout(t, ns, name) {
		if e.Reason != report.ReasonRestoreFailed {
			continue
		}
		out = append(out, e.Note)
		if e.Series != nil {
			for range e.Series.Count - 1 {
				out = append(out, e.Note)
			}
		}
	}
	return out
}
