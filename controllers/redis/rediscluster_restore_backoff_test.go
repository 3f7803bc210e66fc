package redis_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/internal/teststore"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestRestoreOfACorruptedObjectBacksOff: a restore whose shard file is corrupted reads that
// file from the store a handful of times in a minute (back-off 5 s, 10 s, 20 s, 40 s: 4
// reads), not 8 times a second, and says so in one Warning event, not one per try. The
// store's requests are counted by a proxy in front of it.
func TestRestoreOfACorruptedObjectBacksOff(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	createStoreSecrets(t, ns, store.SecretKey)
	createRunning(t, redistest.NewCluster(ns, "whole", 6), "")
	b := waitBackup(t, createBackup(t, ns, "snap", "whole", storeSpec(store.Bucket)), redisv1alpha1.BackupCompleted, rediscontrollers.ReasonBackupCompleted, 2*time.Minute)
	folder := strings.TrimPrefix(b.Status.Location, "s3://"+store.Bucket+"/")
	corruptedFile := b.Status.Shards[1].File
	path := store.DataDir + "/" + store.Bucket + "/" + folder + "/" + corruptedFile
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Clone(data)
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	proxy := teststore.Count(t, store)
	if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxy-ca"},
		Data: map[string][]byte{rediscontrollers.StoreCAKey: proxy.CA}}); err != nil {
		t.Fatal(err)
	}
	restored := redistest.NewCluster(ns, "from-corrupted", 6)
	restored.Spec.Restore = &redisv1alpha1.RestoreSpec{Source: &redisv1alpha1.ObjectStore{Endpoint: proxy.Endpoint, Bucket: store.Bucket,
		Region: store.Region, Path: folder, CredentialsSecret: storeCredentials, CASecret: "proxy-ca"}}
	if err := env.Client.Create(t.Context(), restored); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, func(context.Context) (bool, string) {
		n := proxy.Requests("GET", "/"+corruptedFile)
		return n > 0, fmt.Sprintf("%d reads of %s", n, corruptedFile)
	})
	first := time.Now()
	time.Sleep(60 * time.Second)
	reads, all := proxy.Requests("GET", "/"+corruptedFile), proxy.Requests("", "")
	failures := restoreFailures(t, ns, "from-corrupted")
	t.Logf("in the 60 s after its first read: %d reads of the corrupted file, %d requests to the store in all, %d %s events",
		reads, all, len(failures), rediscontrollers.ReasonRestoreFailed)
	if reads > 5 {
		t.Errorf("the corrupted file was read %d times in %s, want at most 5 (a back-off of 5 s doubling)", reads, time.Since(first).Round(time.Second))
	}
	if all > 16 {
		t.Errorf("%d requests to the store, want at most 16 (the manifest, two reads of each good shard, the corrupted one's tries)", all)
	}
	if len(failures) != 1 {
		t.Errorf("%d %s events, want one for one failure; the first: %q", len(failures), rediscontrollers.ReasonRestoreFailed, failures[:min(len(failures), 2)])
	}
}

// restoreFailures are the messages of the RestoreFailed events of the cluster name in ns
// (counting an event's repeats).
func restoreFailures(t *testing.T, ns, name string) []string {
	t.Helper()
	var out []string
	for _, e := range eventsAbout(t, ns, name) {
		if e.Reason != rediscontrollers.ReasonRestoreFailed {
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
