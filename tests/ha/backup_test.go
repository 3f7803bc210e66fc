package ha

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/crashpoint"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
	"github.com/middleware-operator/middleware-operator/tests/teststore"
)

// TestOperatorKilledMidUpload: the operator dies while a backup's shards are on their way
// to the object store (a crash point, reached once 64 KiB of a shard went up), as a
// SIGKILL or an OOM kill of its pod would leave it: no deferred call, no cleanup. The
// source cluster is left as it was (its slot map, Ready, every key), no manifest is in the
// store, so nothing can restore from the half-written folder; the next operator finishes
// the backup on a new attempt, and a cluster restored from it has every key acknowledged
// before the backup started.
func TestOperatorKilledMidUpload(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	store, objects := teststore.Start(t, "")
	op := r.operator(t, crashpoint.Env+"="+crashpoint.BackupMidUpload)
	key, rc, pw := r.formed(t)
	ns := key.Namespace
	// Shards of a few hundred KiB each, so the crash lands mid-file.
	redistest.Preload(t, rc.Status.Nodes[0].Instance, pw, 30000)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)
	slotsBefore := redistest.MasterSlots(rc)

	dest := createStoreSecrets(t, r.env.Client, ns, store)
	dest.Path = "ha"
	acknowledged := w.Written()
	b := &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "killed"},
		Spec: redisv1alpha1.RedisBackupSpec{Cluster: key.Name, Destination: dest}}
	if err := r.env.Client.Create(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	op.waitCrash(t, "mid-upload")

	// What the dead operator left: a Running backup, no manifest, the cluster untouched.
	if err := r.env.Client.Get(t.Context(), client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Phase != redisv1alpha1.BackupRunning {
		t.Errorf("the backup is %q after the kill, want Running", b.Status.Phase)
	}
	left, err := objects.List(t.Context(), "ha/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range left {
		names = append(names, o.Name)
		if strings.HasSuffix(o.Name, "manifest.json") {
			t.Errorf("a manifest (%s) is in the store after a kill mid-upload: a restore could take the half-written folder for a backup", o.Name)
		}
	}
	t.Logf("the store holds %d objects after the kill: %v", len(left), names)
	w.WaitWritten(t, 200)

	started := time.Now()
	r.operator(t)
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		if err := r.env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		return b.Status.Phase == redisv1alpha1.BackupCompleted, fmt.Sprintf("phase %q (%s), attempts %d", b.Status.Phase, b.Status.Reason, b.Status.Attempts)
	})
	t.Logf("the next operator completed the backup %s after it started, on attempt %d: %d keys, %d bytes",
		time.Since(started).Round(100*time.Millisecond), b.Status.Attempts, b.Status.Keys, b.Status.Bytes)
	if b.Status.Attempts < 2 {
		t.Errorf("attempts %d: the interrupted attempt should count", b.Status.Attempts)
	}

	rc = redistest.WaitShape(t, r.env.Client, key, 3, 6)
	if after := redistest.MasterSlots(rc); fmt.Sprint(after) != fmt.Sprint(slotsBefore) {
		t.Errorf("the source's slot map changed: %v, then %v", slotsBefore, after)
	}
	restored := redistest.NewCluster(ns, "restored", 6)
	restored.Spec.Restore = &redisv1alpha1.RestoreSpec{Backup: b.Name}
	if err := r.env.Client.Create(t.Context(), restored); err != nil {
		t.Fatal(err)
	}
	restoredRC := redistest.WaitShape(t, r.env.Client, client.ObjectKeyFromObject(restored), 3, 6)
	if lost := w.VerifyFirstOn(t, restoredRC, redistest.Password(t, r.env.Client, ns, "restored"), acknowledged); lost > 0 {
		t.Errorf("%d of the %d keys acknowledged before the backup are missing from the restored cluster", lost, acknowledged)
	}
	w.Verify(t, r.env.Client, rc, pw)
}

// createStoreSecrets creates the Secrets of the object store's credentials ("store") and CA
// ("store-ca") in ns, and returns the store as a destination that names them.
func createStoreSecrets(t *testing.T, c client.Client, ns string, store *localcluster.ObjectStore) redisv1alpha1.ObjectStore {
	t.Helper()
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"}, Data: map[string][]byte{
			backupstore.StoreAccessKeyIDKey: []byte(store.AccessKey), backupstore.StoreSecretAccessKeyKey: []byte(store.SecretKey)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-ca"}, Data: map[string][]byte{backupstore.StoreCAKey: store.CA}},
	} {
		if err := c.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	return redisv1alpha1.ObjectStore{Endpoint: store.Endpoint, Bucket: store.Bucket, Region: store.Region, CredentialsSecret: "store", CASecret: "store-ca"}
}
