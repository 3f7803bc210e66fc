package ha

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/archiver"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/restore"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
	"github.com/middleware-operator/middleware-operator/tests/teststore"
)

// archiveRecoveryPoint is the recovery point docs/backup.md promises for the archive: a
// write acknowledged this long before the cluster is deleted is restored.
const archiveRecoveryPoint = time.Second

// TestOperatorKilledWhileArchiving: the operator, which runs every shard's archive follower,
// is SIGKILLed (as an OOM kill of its pod leaves it: its open segments never uploaded)
// while a writer goes on; the next operator waits out the dead one's lease, then every
// shard's follower resumes at the end of what its timeline holds in the store, from the
// master's backlog: the same timeline, no ArchiveGap. The writes acknowledged while no
// operator ran, and those just before the kill that were only in the open segments, are
// archived: a restore to latest of the deleted cluster holds every key acknowledged more
// than the recovery point before the deletion, read through every node.
func TestOperatorKilledWhileArchiving(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	store, _ := teststore.Start(t, "")
	op := r.operator(t)
	c := r.env.Client
	key, dest, rc, pw := createArchived(t, r, store)
	ns := key.Namespace

	w := redistest.StartAckWriter(rc.Status.Nodes[0].Instance, pw)
	w.WriteMore(500)
	waitArchiving(t, c, key, time.Now())
	w.WriteMore(500)
	killedAt := w.Count()
	took := op.stop(t, syscall.SIGKILL)
	killed := time.Now()
	t.Logf("operator SIGKILLed with %d keys acknowledged (exited %.0f ms after the signal)", killedAt, float64(took.Milliseconds()))
	if err := c.Get(t.Context(), key, rc); err != nil {
		t.Fatal(err)
	}
	// The fault happened: what the dead operator last reported archived stops before the
	// kill, and the writer goes on with no operator running.
	for _, sh := range rc.Status.Archive.Shards {
		if sh.ArchivedUpTo == nil || sh.ArchivedUpTo.After(killed) {
			t.Fatalf("%s reports writes archived up to %v, after the kill at %v", sh.Shard, sh.ArchivedUpTo, killed)
		}
	}
	w.WriteMore(1000)

	r.operator(t)
	restarted := time.Now()
	rc = waitArchiving(t, c, key, restarted)
	down := w.Count() - killedAt // acknowledged between the kill and the archive back
	t.Logf("the next operator archives again %.1f s after its start (%.1f s after the kill; %d keys acknowledged while none ran)",
		time.Since(restarted).Seconds(), time.Since(killed).Seconds(), down)
	w.WriteMore(500)
	if err := c.Get(t.Context(), key, rc); err != nil {
		t.Fatal(err)
	}
	for _, sh := range rc.Status.Archive.Shards {
		if sh.Timeline != 1 {
			t.Errorf("%s is on timeline %d after the operator's restart, want 1: the archive should resume its history", sh.Shard, sh.Timeline)
		}
	}
	events := &corev1.EventList{}
	if err := c.List(t.Context(), events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == archiver.ReasonGap {
			t.Errorf("an %s event after the operator's restart: %s", e.Reason, e.Message)
		}
	}

	missing, due, acks, restored := deleteAndRestoreLatest(t, c, rc, w, dest)
	missingDown := 0
	for _, i := range missing {
		if i >= killedAt && i < killedAt+down {
			missingDown++
		}
	}
	t.Logf("%d keys acknowledged (%d more than %s before the deletion, %d while no operator ran), %d missing from the restore (%d of those written while none ran); shards %+v",
		acks, due, archiveRecoveryPoint, down, len(missing), missingDown, restored.Status.Restore.ArchiveShards)
	if len(missing) > 0 {
		t.Errorf("%d of the %d keys acknowledged more than %s before the deletion are missing from the restore to latest (%d of them acknowledged while no operator ran)",
			len(missing), due, archiveRecoveryPoint, missingDown)
	}
}

// TestStalledLeaderDoesNotOverwriteTheArchive: the leading operator freezes (SIGSTOP) while
// it archives a cluster under a writer; the other replica takes the lease and resumes every
// shard's timeline where the store's last segment ends, which is where the frozen leader's
// open segments begin: the same object names. Then the old leader wakes (SIGCONT): its
// followers close their open segments at once, before its elector notices the lost lease.
// The archive's fence refuses those writes (the old leader's log says so), and a restore
// to latest holds every key acknowledged more than the recovery point before the deletion.
func TestStalledLeaderDoesNotOverwriteTheArchive(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	store, _ := teststore.Start(t, "")
	ops := []*replica{r.operator(t), r.operator(t)}
	c := r.env.Client
	key, dest, rc, pw := createArchived(t, r, store)
	w := redistest.StartAckWriter(rc.Status.Nodes[0].Instance, pw)
	w.WriteMore(500)
	waitArchiving(t, c, key, time.Now())
	leader := slices.IndexFunc(ops, func(p *replica) bool { return p.leads() })
	if leader < 0 {
		t.Fatal("no replica says it leads")
	}
	if err := ops[leader].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	frozenAt := w.Count()
	other := ops[1-leader]
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) { return other.leads(), "the other replica does not lead yet" })
	took := time.Now()
	waitArchiving(t, c, key, took.Add(time.Second))
	w.WriteMore(500)
	t.Logf("the leader froze with %d keys acknowledged; the other took the lease %.1f s later and archives from there", frozenAt, took.Sub(stopped).Seconds())
	exited, ok := ops[leader].wake(t, 45*time.Second)
	if !ok {
		t.Fatalf("the old leader still runs 45 s after it woke without its lease")
	}
	log, _ := os.ReadFile(ops[leader].log)
	refused := strings.Count(string(log), redisarchive.ErrFenced.Error())
	t.Logf("the old leader woke and exited %s later; its archive fence refused %d writes", exited.Round(100*time.Millisecond), refused)
	if refused == 0 {
		t.Errorf("the old leader's log names no archive write its fence refused (%q): the test did not stage the race it is named for", redisarchive.ErrFenced.Error())
	}
	w.WriteMore(500)
	if err := c.Get(t.Context(), key, rc); err != nil {
		t.Fatal(err)
	}
	missing, due, acks, restored := deleteAndRestoreLatest(t, c, rc, w, dest)
	t.Logf("%d keys acknowledged (%d more than %s before the deletion), %d missing from the restore; shards %+v",
		acks, due, archiveRecoveryPoint, len(missing), restored.Status.Restore.ArchiveShards)
	if len(missing) > 0 {
		t.Errorf("%d of the %d keys acknowledged more than %s before the deletion are missing from the restore to latest (first: a:%d)",
			len(missing), due, archiveRecoveryPoint, missing[0])
	}
}

// createArchived creates a RedisCluster "origin" of 6 nodes with spec.archive to store (its
// volumes go with it) in a new namespace, and waits until it archives every shard; it
// returns its key, the store as a destination, the cluster and its password.
func createArchived(t *testing.T, r *rig, store *localcluster.ObjectStore) (client.ObjectKey, redisv1alpha1.ObjectStore, *redisv1alpha1.RedisCluster, string) {
	t.Helper()
	c := r.env.Client
	ns := r.env.Namespace(t)
	dest := createStoreSecrets(t, c, ns, store)
	origin := redistest.NewCluster(ns, "origin", 6)
	origin.Spec.Finalizers = "foreground" // its volumes go with it
	origin.Spec.Archive = &redisv1alpha1.ArchiveSpec{Destination: dest}
	if err := c.Create(t.Context(), origin); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(origin)
	redistest.WaitShape(t, c, key, 3, 6)
	return key, dest, waitArchiving(t, c, key, time.Time{}), redistest.Password(t, c, ns, origin.Name)
}

// deleteAndRestoreLatest deletes the archived cluster rc while w writes to it, restores its
// archive to latest into a new cluster "latest", and returns the keys acknowledged more than
// the recovery point before the deletion (due of the acks the writer had) that do not read
// back through every node of it.
func deleteAndRestoreLatest(t *testing.T, c client.Client, rc *redisv1alpha1.RedisCluster, w *redistest.AckWriter, dest redisv1alpha1.ObjectStore) (missing []int, due, acks int, restored *redisv1alpha1.RedisCluster) {
	t.Helper()
	deleted := time.Now()
	if err := c.Delete(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	times := w.Stop()
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(rc), &redisv1alpha1.RedisCluster{})
		return err != nil, "the source cluster is still there"
	})
	for due < len(times) && times[due].Before(deleted.Add(-archiveRecoveryPoint)) {
		due++
	}
	latest := redistest.NewCluster(rc.Namespace, "latest", 6)
	latest.Spec.Restore = &redisv1alpha1.RestoreSpec{Archive: &redisv1alpha1.ArchiveRestoreSpec{Source: dest, Cluster: rc.Name,
		TargetTime: restore.TargetLatest}}
	if err := c.Create(t.Context(), latest); err != nil {
		t.Fatal(err)
	}
	restored = redistest.WaitShape(t, c, client.ObjectKeyFromObject(latest), 3, 6)
	if restored.Status.Restore == nil || restored.Status.Restore.CompletedAt == nil {
		t.Fatalf("the restore is Ready without having completed: %+v", restored.Status.Restore)
	}
	for i, f := range redistest.PresentThroughEach(t, restored, redistest.Password(t, c, rc.Namespace, latest.Name), due) {
		if f != len(restored.Status.Nodes) {
			missing = append(missing, i)
		}
	}
	return missing, due, len(times), restored
}

// waitArchiving waits until the cluster's Archiving condition is True with every one of its
// three shards archived up to a write received after since, and returns it.
func waitArchiving(t *testing.T, c client.Client, key client.ObjectKey, since time.Time) *redisv1alpha1.RedisCluster {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(rc.Status.Conditions, report.ConditionArchiving)
		ok := cond != nil && cond.Status == metav1.ConditionTrue && rc.Status.Archive != nil && len(rc.Status.Archive.Shards) == 3
		var behind []string
		if ok {
			for _, sh := range rc.Status.Archive.Shards {
				if !since.IsZero() && (sh.ArchivedUpTo == nil || !sh.ArchivedUpTo.After(since)) {
					behind = append(behind, fmt.Sprintf("%s up to %v on timeline %d (%s)", sh.Shard, sh.ArchivedUpTo, sh.Timeline, sh.LastError))
				}
			}
		}
		return ok && len(behind) == 0, fmt.Sprintf("Archiving %+v; shards behind: %v", cond, behind)
	})
	return rc
}
