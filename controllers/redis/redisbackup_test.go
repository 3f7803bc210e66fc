package redis_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/controllers/redisbackup"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/loading"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// Names of the store's Secrets in each test namespace.
const (
	storeCredentials = "backup-credentials"
	storeCA          = "store-ca"
)

// createStoreSecrets creates the credentials Secret (with secretKey as the secret access
// key) and the CA Secret of the suite's object store in ns.
func createStoreSecrets(t *testing.T, ns, secretKey string) {
	t.Helper()
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: storeCredentials}, Data: map[string][]byte{
			backupstore.StoreAccessKeyIDKey: []byte(store.AccessKey), backupstore.StoreSecretAccessKeyKey: []byte(secretKey)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: storeCA}, Data: map[string][]byte{backupstore.StoreCAKey: store.CA}},
	} {
		if err := env.Client.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
}

// storeSpec is the suite's object store as a RedisBackup destination, with the default path.
func storeSpec(bucket string) redisv1alpha1.ObjectStore {
	return redisv1alpha1.ObjectStore{Endpoint: store.Endpoint, Bucket: bucket, Region: store.Region,
		CredentialsSecret: storeCredentials, CASecret: storeCA}
}

// createBackup creates a RedisBackup of cluster to the suite's bucket.
func createBackup(t *testing.T, ns, name, cluster string, dest redisv1alpha1.ObjectStore) client.ObjectKey {
	t.Helper()
	b := &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: redisv1alpha1.RedisBackupSpec{Cluster: cluster, Destination: dest}}
	if err := env.Client.Create(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	return client.ObjectKeyFromObject(b)
}

// waitBackup waits until the backup's Completed condition has reason (and, for a finished
// backup, its phase), and returns it.
func waitBackup(t *testing.T, key client.ObjectKey, phase redisv1alpha1.BackupPhase, reason string, within time.Duration) *redisv1alpha1.RedisBackup {
	t.Helper()
	b := &redisv1alpha1.RedisBackup{}
	testenv.Eventually(t, within, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, key, b); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(b.Status.Conditions, redisbackup.ConditionBackupCompleted)
		return b.Status.Phase == phase && c != nil && c.Reason == reason,
			fmt.Sprintf("phase %q reason %q", b.Status.Phase, b.Status.Reason)
	})
	return b
}

// bucketAt is a client of the suite's bucket under the folder dir, with the root user.
func bucketAt(t *testing.T, dir string) *objectstore.Client {
	t.Helper()
	cfg := store.Config()
	cfg.Prefix = dir
	c, err := objectstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bucketObjects lists the object names under dir in the suite's bucket.
func bucketObjects(t *testing.T, dir string) []string {
	t.Helper()
	objs, err := bucketAt(t, dir).List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}

// readManifest reads and parses the manifest of the backup folder dir.
func readManifest(t *testing.T, dir string) *backup.Manifest {
	t.Helper()
	var buf bytes.Buffer
	if _, err := bucketAt(t, dir).Get(t.Context(), backup.ManifestName, &buf, nil); err != nil {
		t.Fatal(err)
	}
	m, err := backup.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// assertBackupOf checks a Completed backup of rc: one shard per master, each from an
// in-sync replica, the slots of all of them the 16384 the cluster serves, at least minKeys
// keys, and the folder holding exactly the manifest and the shards' files.
func assertBackupOf(t *testing.T, b *redisv1alpha1.RedisBackup, rc *redisv1alpha1.RedisCluster, minKeys int) {
	t.Helper()
	// The roles as the status has them now, just after the backup: a failover since rc was
	// read (a recovery that restores separation, say) makes a replica of a former master.
	cur := &redisv1alpha1.RedisCluster{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(rc), cur); err != nil {
		t.Fatal(err)
	}
	replicas := map[string]bool{}
	for _, n := range cur.Status.Nodes {
		replicas[n.Name] = n.Type == "slave"
	}
	slots := 0
	want := []string{backup.ManifestName}
	for i, sh := range b.Status.Shards {
		if sh.SourceRole != "replica" || !replicas[sh.Source] {
			t.Errorf("shard %d was taken from %s (%s), want a replica", i, sh.Source, sh.SourceRole)
		}
		slots += len(redistest.Slots(sh.Slots))
		want = append(want, sh.File)
	}
	if len(b.Status.Shards) != int(rc.Status.Masters) || slots != nodes.SlotCount {
		t.Errorf("%d shards with %d slots, want %d shards with %d", len(b.Status.Shards), slots, rc.Status.Masters, nodes.SlotCount)
	}
	if b.Status.Keys < int64(minKeys) {
		t.Errorf("the backup has %d keys, want at least the %d acknowledged before it started", b.Status.Keys, minKeys)
	}
	dir := strings.TrimPrefix(b.Status.Location, "s3://"+store.Bucket+"/")
	slices.Sort(want)
	if got := bucketObjects(t, dir); !slices.Equal(got, want) {
		t.Errorf("the folder %s holds %v, want %v", b.Status.Location, got, want)
	}
	m := readManifest(t, dir)
	if m.Cluster.Name != rc.Name || m.Keys() != b.Status.Keys || len(m.Shards) != len(b.Status.Shards) {
		t.Errorf("the manifest says cluster %s with %d keys in %d shards; the status %s, %d, %d",
			m.Cluster.Name, m.Keys(), len(m.Shards), rc.Name, b.Status.Keys, len(b.Status.Shards))
	}
}

// eventsAbout are the events about the object named name in ns.
func eventsAbout(t *testing.T, ns, name string) []eventsv1.Event {
	t.Helper()
	evs := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range evs.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// eventCount counts the events of reason about the object named name in ns, and their
// notes: an event the recorder merged into a series counts as many times as it happened.
func eventCount(t *testing.T, ns, name, reason string) (int, []string) {
	t.Helper()
	n, notes := 0, []string(nil)
	for _, e := range eventsAbout(t, ns, name) {
		if e.Reason != reason {
			continue
		}
		times := 1
		if e.Series != nil {
			times = int(e.Series.Count)
		}
		n += times
		for range times {
			notes = append(notes, e.Note)
		}
	}
	return n, notes
}

// eventReasons lists the reasons of the events about the object named name in ns.
func eventReasons(t *testing.T, ns, name string) []string {
	t.Helper()
	var out []string
	for _, e := range eventsAbout(t, ns, name) {
		out = append(out, e.Type+"/"+e.Reason)
	}
	return out
}

func TestRedisBackupWaitsWithAReasonUntilItsCauseIsGone(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	createStoreSecrets(t, ns, "not-the-secret-key")
	missing := createBackup(t, ns, "of-nothing", "absent", storeSpec(store.Bucket))
	waitBackup(t, missing, redisv1alpha1.BackupPending, redisbackup.ReasonClusterNotFound, 30*time.Second)

	key, rc, _ := createRunning(t, redistest.NewCluster(ns, "guarded", 6), "")
	denied := createBackup(t, ns, "denied", "guarded", storeSpec(store.Bucket))
	b := waitBackup(t, denied, redisv1alpha1.BackupPending, redisbackup.ReasonStoreUnavailable, time.Minute)
	if !strings.Contains(b.Status.Reason, "denied") && !strings.Contains(b.Status.Reason, "signature") {
		t.Errorf("wrong credentials give the reason %q, want one that says access is denied", b.Status.Reason)
	}
	noBucket := createBackup(t, ns, "no-bucket", "guarded", storeSpec("no-such-bucket"))
	waitBackup(t, noBucket, redisv1alpha1.BackupPending, redisbackup.ReasonStoreUnavailable, time.Minute)

	// The right credentials: the waiting backup goes on by itself.
	creds := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: storeCredentials}, creds); err != nil {
		t.Fatal(err)
	}
	creds.Data[backupstore.StoreSecretAccessKeyKey] = []byte(store.SecretKey)
	if err := env.Client.Update(t.Context(), creds); err != nil {
		t.Fatal(err)
	}
	b = waitBackup(t, denied, redisv1alpha1.BackupCompleted, redisbackup.ReasonBackupCompleted, time.Minute)
	assertBackupOf(t, b, rc, 0)
	if got := eventReasons(t, ns, "denied"); !slices.Contains(got, "Warning/"+redisbackup.ReasonStoreUnavailable) ||
		!slices.Contains(got, "Normal/"+redisbackup.ReasonBackupCompleted) {
		t.Errorf("events of the backup: %v, want a Warning %s and a %s", got, redisbackup.ReasonStoreUnavailable, redisbackup.ReasonBackupCompleted)
	}

	// A paused cluster is not backed up until it is unpaused.
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pause":true}}`)
	paused := createBackup(t, ns, "paused", "guarded", storeSpec(store.Bucket))
	waitBackup(t, paused, redisv1alpha1.BackupPending, redisbackup.ReasonClusterPaused, 30*time.Second)
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pause":false}}`)
	waitBackup(t, paused, redisv1alpha1.BackupCompleted, redisbackup.ReasonBackupCompleted, time.Minute)
}

// waitRestored waits until the restoring cluster key is Running and Ready with its restore
// completed, and returns it.
func waitRestored(t *testing.T, key client.ObjectKey) *redisv1alpha1.RedisCluster {
	t.Helper()
	rc := waitRunning(t, key)
	if rc.Status.Restore == nil || rc.Status.Restore.CompletedAt == nil || int(rc.Status.Restore.Shards) != len(rc.Status.Restore.LoadedShards) {
		t.Fatalf("%s is Ready but its restore status is %+v", key, rc.Status.Restore)
	}
	return rc
}

func TestRedisBackupRestoresIntoANewClusterHereAndInAnotherNamespace(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	createStoreSecrets(t, ns, store.SecretKey)
	origin := redistest.NewCluster(ns, "origin", 6)
	origin.Spec.Finalizers = "foreground" // its volumes go with it
	_, rc, pw := createRunning(t, origin, "")
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 500)

	acknowledged := w.Written() // every key below this one was acknowledged before the backup started
	start := time.Now()
	key := createBackup(t, ns, "nightly", "origin", storeSpec(store.Bucket))
	b := waitBackup(t, key, redisv1alpha1.BackupCompleted, redisbackup.ReasonBackupCompleted, 2*time.Minute)
	t.Logf("backup of %d keys (%d bytes) completed %.1f s after it was created", b.Status.Keys, b.Status.Bytes, time.Since(start).Seconds())
	assertBackupOf(t, b, rc, acknowledged)
	w.WaitWritten(t, acknowledged+200) // the writer goes on while the source is deleted

	if err := env.Client.Delete(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(rc), &redisv1alpha1.RedisCluster{})
		return err != nil, "the source cluster is still there"
	})
	written, _ := w.Stop()
	t.Logf("the writer had %d keys acknowledged, %d of them before the backup started", written, acknowledged)

	// The same namespace under another name, from the RedisBackup; another namespace from
	// the backup's folder, into a cluster with ACL users (the operator's own user may not
	// empty slots: the load's emptying runs as the replay user).
	other := env.Namespace(t)
	createStoreSecrets(t, other, store.SecretKey)
	here := redistest.NewCluster(ns, "reborn", 6)
	here.Spec.Restore = &redisv1alpha1.RestoreSpec{Backup: "nightly"}
	elsewhere := redistest.NewCluster(other, "elsewhere", 6)
	source := storeSpec(store.Bucket)
	source.Path = strings.TrimPrefix(b.Status.Location, "s3://"+store.Bucket+"/")
	elsewhere.Spec.Restore = &redisv1alpha1.RestoreSpec{Source: &source}
	elsewhere.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true}
	// Its redis.conf rewrites the AOF from 1 kB: the load outgrows that, so its nodes load
	// with the AOF off (rdbload.WorthPausingAppendOnly); the nodes of "reborn", with Redis's
	// 64 MB, keep their AOF on.
	conf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "small-rewrites", Namespace: other},
		Data: map[string]string{"redis.conf": "auto-aof-rewrite-min-size 1kb\n"}}
	if err := env.Client.Create(t.Context(), conf); err != nil {
		t.Fatal(err)
	}
	elsewhere.Spec.Pod = []redisv1alpha1.PodSpec{{Configmap: conf.Name}}
	for _, c := range []*redisv1alpha1.RedisCluster{here, elsewhere} {
		start := time.Now()
		if err := env.Client.Create(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		heldOff(t, c)
		restored := waitRestored(t, client.ObjectKeyFromObject(c))
		t.Logf("%s/%s restored %d keys and Ready %.1f s after it was created", c.Namespace, c.Name, restored.Status.Restore.Keys, time.Since(start).Seconds())
		testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
			np := &networkingv1.NetworkPolicy{}
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), np)
			return err == nil && admitsClients(np, c), fmt.Sprintf("the NetworkPolicy does not admit clients again after the restore (%v)", err)
		})
		if restored.Status.Masters != 3 || restored.Status.Restore.Keys != b.Status.Keys {
			t.Errorf("%s/%s has %d masters and restored %d keys, want 3 and the backup's %d", c.Namespace, c.Name,
				restored.Status.Masters, restored.Status.Restore.Keys, b.Status.Keys)
		}
		if lost := w.VerifyFirstOn(t, restored, redistest.Password(t, env.Client, c.Namespace, c.Name), acknowledged); lost > 0 {
			t.Errorf("%d of the %d keys acknowledged before the backup are missing from %s/%s", lost, acknowledged, c.Namespace, c.Name)
		}
		if got := eventReasons(t, c.Namespace, c.Name); !slices.Contains(got, "Normal/"+report.ReasonRestoreCompleted) {
			t.Errorf("events of %s: %v, want %s", c.Name, got, report.ReasonRestoreCompleted)
		}
		appendOnlyBackOn(t, restored, c == elsewhere)
	}
}

// appendOnlyBackOn checks that each shard of a restored cluster loaded with its nodes' AOF
// off (as its RestoreShardLoaded events say) when paused, with it on otherwise, and that
// every node's AOF is on and rewritten when the cluster is Ready.
func appendOnlyBackOn(t *testing.T, rc *redisv1alpha1.RedisCluster, paused bool) {
	t.Helper()
	loaded := 0
	for _, e := range eventsAbout(t, rc.Namespace, rc.Name) {
		if e.Reason != report.ReasonRestoreShardLoaded {
			continue
		}
		loaded++
		if strings.Contains(e.Note, "AOF off") != paused {
			t.Errorf("%s/%s: %q, want the AOF paused: %t", rc.Namespace, rc.Name, e.Note, paused)
		}
	}
	if loaded == 0 {
		t.Errorf("%s/%s has no %s event", rc.Namespace, rc.Name, report.ReasonRestoreShardLoaded)
	}
	pw := redistest.Password(t, env.Client, rc.Namespace, rc.Name)
	for _, n := range rc.Status.Nodes {
		c := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: pw, MaxRetries: -1})
		info, err := c.Info(t.Context(), "persistence").Result()
		_ = c.Close()
		if err != nil {
			t.Fatalf("INFO persistence of %s: %v", n.Name, err)
		}
		rewritten := !paused || !strings.Contains(info, "aof_rewrites:0\r\n") // a paused node rewrote its AOF when turned on
		if !strings.Contains(info, "aof_enabled:1") || !strings.Contains(info, "aof_rewrite_in_progress:0") || !strings.Contains(info, "aof_last_bgrewrite_status:ok") || !rewritten {
			t.Errorf("%s/%s %s when Ready after its restore: the AOF is not on and rewritten:\n%s", rc.Namespace, rc.Name, n.Name, info)
		}
	}
}

// heldOff checks that c's NetworkPolicy, as first seen, admits no client to port 6379 while
// c's restore has not loaded every shard.
func heldOff(t *testing.T, c *redisv1alpha1.RedisCluster) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), np)
		return err == nil, fmt.Sprintf("no NetworkPolicy yet (%v)", err)
	})
	cur := &redisv1alpha1.RedisCluster{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(c), cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.Restore != nil && cur.Status.Restore.CompletedAt != nil {
		t.Fatalf("%s/%s finished its restore before its NetworkPolicy was seen: nothing to check", c.Namespace, c.Name)
	}
	if admitsClients(np, c) {
		t.Errorf("%s/%s admits clients while its restore loads: %+v", c.Namespace, c.Name, np.Spec.Ingress)
	}
}

// admitsClients reports whether np has the clients' rule of a cluster without
// spec.networkPolicy.clients: port 6379 from the pods of the cluster's own namespace
// (resources.RedisDefaultClients), which a restore holds back until its data is loaded.
func admitsClients(np *networkingv1.NetworkPolicy, rc *redisv1alpha1.RedisCluster) bool {
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 1 && rule.Ports[0].Port.IntValue() == resources.RedisPort &&
			equality.Semantic.DeepEqual(rule.From, resources.RedisDefaultClients(rc)) {
			return true
		}
	}
	return false
}

func TestRedisBackupScheduleRunsAndKeepsWhatItSays(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	createStoreSecrets(t, ns, store.SecretKey)
	createRunning(t, redistest.NewCluster(ns, "timed", 6), "")
	sch := &redisv1alpha1.RedisBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "often"},
		Spec: redisv1alpha1.RedisBackupScheduleSpec{Cluster: "timed", Schedule: "@every 5m", Destination: storeSpec(store.Bucket),
			Keep: &redisv1alpha1.BackupRetention{Count: ptr.To[int32](2)}}}
	if err := env.Client.Create(t.Context(), sch); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var kept []redisv1alpha1.RedisBackup
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		list := &redisv1alpha1.RedisBackupList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{redisbackup.ScheduleLabel: "often"}); err != nil {
			return false, err.Error()
		}
		kept = kept[:0]
		busy := false
		for _, b := range list.Items {
			seen[b.Name] = true
			if b.Status.Phase == redisv1alpha1.BackupCompleted {
				kept = append(kept, b)
			}
			busy = busy || (b.Status.Phase != redisv1alpha1.BackupCompleted && b.Status.Phase != redisv1alpha1.BackupFailed)
		}
		if !busy && len(seen) < 3 {
			dueNow(t, client.ObjectKeyFromObject(sch), time.Now())
		}
		return len(seen) >= 3 && len(list.Items) == 2 && len(kept) == 2,
			fmt.Sprintf("%d backups seen, %d there, %d completed", len(seen), len(list.Items), len(kept))
	})
	if err := env.Client.Patch(t.Context(), sch, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))); err != nil {
		t.Fatal(err)
	}
	// A suspended schedule has no next run to show.
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisBackupSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sch), cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, redisbackup.ConditionScheduled)
		return c != nil && c.Reason == redisbackup.ReasonScheduleSuspended && cur.Status.NextScheduleTime == nil,
			fmt.Sprintf("condition %+v, nextScheduleTime %v", c, cur.Status.NextScheduleTime)
	})
	// What retention deleted is gone from the bucket too (reclaimPolicy Delete): the
	// cluster's folder holds the two kept backups' files, and nothing else, once deletions end.
	var want []string
	for _, b := range kept {
		for _, f := range append([]string{backup.ManifestName}, shardFiles(b)...) {
			want = append(want, b.Name+"/"+f)
		}
	}
	slices.Sort(want)
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		got := bucketObjects(t, ns+"/timed")
		return slices.Equal(got, want), fmt.Sprintf("the folder holds %v, want %v", got, want)
	})
	// Each retired backup is reported once, in one BackupsRetired event (events are written
	// in the background: wait for every one to be reported, then count).
	var notes []string
	reportedIn := func(name string) int {
		n := 0
		for _, note := range notes {
			if strings.Contains(note, name) {
				n++
			}
		}
		return n
	}
	isKept := func(name string) bool {
		return slices.ContainsFunc(kept, func(b redisv1alpha1.RedisBackup) bool { return b.Name == name })
	}
	testenv.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		_, notes = eventCount(t, ns, "often", redisbackup.ReasonBackupsRetired)
		for name := range seen {
			if !isKept(name) && reportedIn(name) == 0 {
				return false, fmt.Sprintf("the retired backup %s is in no %s event: %q", name, redisbackup.ReasonBackupsRetired, notes)
			}
		}
		return true, ""
	})
	for name := range seen {
		want := 1
		if isKept(name) {
			want = 0
		}
		if got := reportedIn(name); got != want {
			t.Errorf("backup %s (kept: %t) is in %d %s events, want %d: %q", name, isKept(name), got, redisbackup.ReasonBackupsRetired, want, notes)
		}
	}
	t.Logf("%d backups made by the schedule; %d kept: %s, %s", len(seen), len(kept), kept[0].Name, kept[1].Name)
}

// dueNow makes the next run of the @every 5m schedule key due at now, as if its last run
// had been 5 minutes before (the floor keeps a real schedule from running faster), unless
// its last run is that old already.
func dueNow(t *testing.T, key client.ObjectKey, now time.Time) {
	t.Helper()
	sch := &redisv1alpha1.RedisBackupSchedule{}
	if err := env.Client.Get(t.Context(), key, sch); err != nil {
		t.Fatal(err)
	}
	last := sch.CreationTimestamp.Time
	if sch.Status.LastScheduleTime != nil {
		last = sch.Status.LastScheduleTime.Time
	}
	if now.Sub(last) > redisv1alpha1.MinScheduleInterval {
		return
	}
	sch.Status.LastScheduleTime = &metav1.Time{Time: now.Add(-redisv1alpha1.MinScheduleInterval - time.Second)}
	if err := env.Client.Status().Update(t.Context(), sch); err != nil && !apierrors.IsConflict(err) {
		t.Fatal(err)
	}
}

// slowSnapshots makes the node of pod write its snapshots in about d (Redis's
// rdb-key-save-delay, per key), for its keys now. The setting goes with the process.
func slowSnapshots(t *testing.T, rc *redisv1alpha1.RedisCluster, pod, pw string, d time.Duration) {
	t.Helper()
	i := slices.IndexFunc(rc.Status.Nodes, func(n redisv1alpha1.RedisNode) bool { return n.Name == pod })
	if i < 0 {
		t.Fatalf("no node %s in the status", pod)
	}
	c := goredis.NewClient(&goredis.Options{Addr: rc.Status.Nodes[i].Instance, Password: pw, Protocol: 2, DisableIdentity: true})
	defer func() { _ = c.Close() }()
	keys, err := c.DBSize(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	perKey := d.Microseconds() / max(keys, 1)
	if err := c.ConfigSet(t.Context(), "rdb-key-save-delay", strconv.FormatInt(perKey, 10)).Err(); err != nil {
		t.Fatal(err)
	}
}

// shardFiles are the file names of a backup's shards.
func shardFiles(b redisv1alpha1.RedisBackup) []string {
	out := make([]string, len(b.Status.Shards))
	for i, sh := range b.Status.Shards {
		out[i] = sh.File
	}
	return out
}

func TestRedisBackupAndRestoreSurviveFaults(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	createStoreSecrets(t, ns, store.SecretKey)
	key, rc, pw := createRunning(t, redistest.NewCluster(ns, "faulty", 6), "")
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)

	// A source replica killed while its snapshot is being prepared: the attempt fails, the
	// next one succeeds, and the cluster loses nothing.
	var replica string
	for _, n := range rc.Status.Nodes {
		if n.Type == "slave" {
			replica = n.Name
			break
		}
	}
	acknowledged := w.Written()
	// A few hundred keys snapshot in milliseconds: the replica writes its snapshot slowly
	// (about 8 s) so that the test sees the attempt running and kills the replica within it.
	slowSnapshots(t, rc, replica, pw, 8*time.Second)
	crashed := createBackup(t, ns, "crashed", "faulty", storeSpec(store.Bucket))
	waitBackup(t, crashed, redisv1alpha1.BackupRunning, redisbackup.ReasonBackupStarted, time.Minute)
	if err := kubelet.Crash(ns, replica); err != nil {
		t.Fatal(err)
	}
	b := waitBackup(t, crashed, redisv1alpha1.BackupCompleted, redisbackup.ReasonBackupCompleted, 2*time.Minute)
	if b.Status.Attempts < 2 || !slices.Contains(eventReasons(t, ns, "crashed"), "Warning/"+redisbackup.ReasonBackupFailed) {
		t.Errorf("the backup whose source was killed took %d attempts, events %v; want a failed attempt reported, then a new one", b.Status.Attempts, eventReasons(t, ns, "crashed"))
	}
	rc = waitRunning(t, key)
	// The retry copied from a replica in sync (a crashed one that is still syncing is not
	// chosen), so it holds every key acknowledged before the backup was asked for.
	assertBackupOf(t, b, rc, acknowledged)
	for i, sh := range b.Status.Shards {
		if sh.Keys == 0 {
			t.Errorf("shard %d of the retried backup is empty", i)
		}
	}

	// The operator stopped mid-upload: its status says Running, a partial file is in the
	// folder. The next operator copies again and records what it copied.
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pause":true}}`)
	cut := createBackup(t, ns, "cut", "faulty", storeSpec(store.Bucket))
	waitBackup(t, cut, redisv1alpha1.BackupPending, redisbackup.ReasonClusterPaused, 30*time.Second)
	if _, err := bucketAt(t, ns+"/faulty/cut").Put(t.Context(), "shard-000.rdb", strings.NewReader("REDIS0010 cut short"), -1); err != nil {
		t.Fatal(err)
	}
	running := &redisv1alpha1.RedisBackup{}
	if err := env.Client.Get(t.Context(), cut, running); err != nil {
		t.Fatal(err)
	}
	running.Status.Phase, running.Status.Attempts, running.Status.Reason = redisv1alpha1.BackupRunning, 1, "attempt 1: copying 3 shards"
	if err := env.Client.Status().Update(t.Context(), running); err != nil {
		t.Fatal(err)
	}
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pause":false}}`)
	b = waitBackup(t, cut, redisv1alpha1.BackupCompleted, redisbackup.ReasonBackupCompleted, time.Minute)
	if b.Status.Attempts != 2 {
		t.Errorf("the backup cut short completed after %d attempts, want 2", b.Status.Attempts)
	}
	assertBackupOf(t, b, waitRunning(t, key), acknowledged)

	// A corrupted file at restore: nothing of that shard stays loaded (the other two are), the
	// cluster is not Ready and says why; once the file is whole again, the restore completes.
	file := store.DataDir + "/" + store.Bucket + "/" + ns + "/faulty/cut/" + b.Status.Shards[1].File
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	corrupted := bytes.Clone(whole)
	corrupted[len(corrupted)/2] ^= 0xff
	if err := os.WriteFile(file, corrupted, 0o600); err != nil {
		t.Fatal(err)
	}
	restored := redistest.NewCluster(ns, "from-cut", 6)
	restored.Spec.Restore = &redisv1alpha1.RestoreSpec{Backup: "cut"}
	if err := env.Client.Create(t.Context(), restored); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
		got := eventReasons(t, ns, "from-cut")
		return slices.Contains(got, "Warning/"+report.ReasonRestoreFailed), fmt.Sprintf("events %v", got)
	})
	// The two whole shards load; the corrupted one does not, and the cluster is not Ready.
	partial := &redisv1alpha1.RedisCluster{}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(restored), partial); err != nil {
			return false, err.Error()
		}
		r := partial.Status.Restore
		return r != nil && len(r.LoadedShards) == 2, fmt.Sprintf("restore status %+v, want the 2 whole shards loaded", r)
	})
	if meta.IsStatusConditionTrue(partial.Status.Conditions, "Ready") || partial.Status.Restore.CompletedAt != nil {
		t.Errorf("with shard 1's file corrupted the restore says Ready %v, status %+v", meta.IsStatusConditionTrue(partial.Status.Conditions, "Ready"), partial.Status.Restore)
	}
	corruptedMaster := 0
	for _, n := range partial.Status.Nodes {
		if n.Type != "master" || n.Slots != b.Status.Shards[1].Slots {
			continue
		}
		corruptedMaster++
		if slices.Contains(partial.Status.Restore.LoadedShards, n.NodeID) {
			t.Errorf("the master of the corrupted shard (%s) is recorded as loaded: %v", n.Name, partial.Status.Restore.LoadedShards)
		}
		// The load streams the file and learns it is damaged at its end, then empties the
		// shard's slots: between attempts (5 s, 10 s... apart) the master holds none of it.
		// A look may meet an attempt under way (a few ms): three looks, one must see none.
		c := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: redistest.Password(t, env.Client, ns, "from-cut")})
		var seen []string
		for range 3 {
			keys, err := c.DBSize(t.Context()).Result()
			if err == nil && keys == 0 {
				seen = nil
				break
			}
			seen = append(seen, fmt.Sprintf("%d keys (%v)", keys, err))
			time.Sleep(300 * time.Millisecond)
		}
		if seen != nil {
			t.Errorf("the master of the corrupted shard (%s) holds keys at every look: %v, want none", n.Name, seen)
		}
		_ = c.Close()
	}
	if corruptedMaster != 1 {
		t.Errorf("%d masters serve the corrupted shard's slots %s, want 1", corruptedMaster, b.Status.Shards[1].Slots)
	}
	if err := os.WriteFile(file, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	done := waitRestored(t, client.ObjectKeyFromObject(restored))
	if lost := w.VerifyFirstOn(t, done, redistest.Password(t, env.Client, ns, "from-cut"), acknowledged); lost > 0 {
		t.Errorf("%d keys missing after the restore", lost)
	}
	w.Verify(t, env.Client, waitRunning(t, key), pw) // the source lost nothing through all of it
}

// reloadLostShards sets the reload annotation of the cluster at key to from, waits until the
// reload is over (status.reload and the annotation gone, Ready) and the cluster has its 3
// masters and 6 nodes, and returns it.
func reloadLostShards(t *testing.T, key client.ObjectKey, from string) *redisv1alpha1.RedisCluster {
	t.Helper()
	cur := &redisv1alpha1.RedisCluster{}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, loading.RestoreLostShardsAnnotation, from)
	if err := env.Client.Patch(t.Context(), &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	annotated := time.Now()
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		_, still := cur.Annotations[loading.RestoreLostShardsAnnotation]
		return cur.Status.Reload == nil && !still && meta.IsStatusConditionTrue(cur.Status.Conditions, report.ConditionReady),
			fmt.Sprintf("phase %s (%s), reload %+v", cur.Status.Phase, cur.Status.Reason, cur.Status.Reload)
	})
	rc := redistest.WaitShape(t, env.Client, key, 3, 6)
	t.Logf("the lost slots were reloaded from %s and the cluster Ready %s after the annotation", from, time.Since(annotated).Round(time.Second))
	return rc
}

// TestRedisClusterReloadsALostShardFromABackup: a master and its only replica lose their
// volumes after a backup; the user names the backup in the reload annotation instead of
// accepting the loss. The lost slots are given up, served again by a live master, and the
// backup's keys in them are loaded there: every key acknowledged before the backup reads
// back through every node, and every key outside the lost slots too. The other shards keep
// serving from the loss to the end of the reload: a probe writing to their slots meets no
// error.
func TestRedisClusterReloadsALostShardFromABackup(t *testing.T) {
	t.Parallel()
	ns, key, rc, pw := formed(t, "reload", 6, 3)
	createStoreSecrets(t, ns, store.SecretKey)
	master, replica, seed := redistest.OneShard(rc)
	w := redistest.StartWriter(seed.Instance, pw)
	w.WaitWritten(t, 300)
	acknowledged := w.Written()
	waitBackup(t, createBackup(t, ns, "before-loss", "reload", storeSpec(store.Bucket)), redisv1alpha1.BackupCompleted,
		redisbackup.ReasonBackupCompleted, 2*time.Minute)
	w.WaitWritten(t, acknowledged+200)
	lostSlots := redistest.Slots(master.Slots)
	inLost := func(slot int) bool { _, ok := slices.BinarySearch(lostSlots, slot); return ok }
	// The other shards serve throughout (cluster-require-full-coverage no): a probe writing
	// only to their slots counts every failed write from the loss to the end of the reload.
	probe := redistest.StartProbe(seed.Instance, pw, inLost)
	for probe.Acked() < 100 {
		time.Sleep(20 * time.Millisecond)
	}

	for _, n := range []redisv1alpha1.RedisNode{master, replica} {
		if err := kubelet.LoseData(ns, n.Name); err != nil {
			t.Fatal(err)
		}
	}
	cur := &redisv1alpha1.RedisCluster{}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		return cur.Status.Phase == redisv1alpha1.PhaseFailed && strings.Contains(cur.Status.Reason, loading.RestoreLostShardsAnnotation),
			fmt.Sprintf("phase %s (%s)", cur.Status.Phase, cur.Status.Reason)
	})
	rc = reloadLostShards(t, key, "before-loss")
	if n, notes := eventCount(t, ns, "reload", report.ReasonLostSlotsReloaded); n != 1 {
		t.Errorf("%d %s events %q, want one: the reload ended once", n, report.ReasonLostSlotsReloaded, notes)
	}
	// Only the reload annotation was set: the Warning says so, not that accept-data-loss is.
	if _, notes := eventCount(t, ns, "reload", "DataLossAccepted"); len(notes) != 1 ||
		strings.Contains(notes[0], rediscontrollers.AcceptDataLossAnnotation) || !strings.Contains(notes[0], "RedisBackup before-loss") {
		t.Errorf("DataLossAccepted events %q, want one naming the reload from RedisBackup before-loss, not %s", notes, rediscontrollers.AcceptDataLossAnnotation)
	}
	if lost := w.VerifyFirstOn(t, rc, pw, acknowledged); lost > 0 {
		t.Errorf("%d of the %d keys acknowledged before the backup are missing after the reload", lost, acknowledged)
	}
	gone := w.VerifyExcept(t, env.Client, rc, pw, inLost)
	t.Logf("%d keys in the lost slots were not read back (those written after the backup went with the shard)", gone)
	t.Logf("the probe wrote %d keys to the other shards' slots from before the loss to the end of the reload", probe.Verify(t, rc, pw))
}
