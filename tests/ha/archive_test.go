package ha

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
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
	pw := redistest.Password(t, c, ns, origin.Name)
	rc := waitArchiving(t, c, key, time.Time{})

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
		if e.Reason == rediscontrollers.ReasonArchiveGap {
			t.Errorf("an %s event after the operator's restart: %s", e.Reason, e.Message)
		}
	}

	deleted := time.Now()
	if err := c.Delete(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	acks := w.Stop()
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, key, &redisv1alpha1.RedisCluster{})
		return err != nil, "the source cluster is still there"
	})
	due := 0
	for due < len(acks) && acks[due].Before(deleted.Add(-archiveRecoveryPoint)) {
		due++
	}
	latest := redistest.NewCluster(ns, "latest", 6)
	latest.Spec.Restore = &redisv1alpha1.RestoreSpec{Archive: &redisv1alpha1.ArchiveRestoreSpec{Source: dest, Cluster: origin.Name,
		TargetTime: rediscontrollers.TargetLatest}}
	if err := c.Create(t.Context(), latest); err != nil {
		t.Fatal(err)
	}
	restored := redistest.WaitShape(t, c, client.ObjectKeyFromObject(latest), 3, 6)
	if restored.Status.Restore == nil || restored.Status.Restore.CompletedAt == nil {
		t.Fatalf("the restore is Ready without having completed: %+v", restored.Status.Restore)
	}
	missing, missingDown := 0, 0
	for i, f := range redistest.PresentThroughEach(t, restored, redistest.Password(t, c, ns, latest.Name), due) {
		if f != len(restored.Status.Nodes) {
			missing++
			if i >= killedAt && i < killedAt+down {
				missingDown++
			}
		}
	}
	t.Logf("%d keys acknowledged (%d more than %s before the deletion, %d while no operator ran), %d missing from the restore (%d of those written while none ran); shards %+v",
		len(acks), due, archiveRecoveryPoint, down, missing, missingDown, restored.Status.Restore.ArchiveShards)
	if missing > 0 {
		t.Errorf("%d of the %d keys acknowledged more than %s before the deletion are missing from the restore to latest (%d of them acknowledged while no operator ran)",
			missing, due, archiveRecoveryPoint, missingDown)
	}
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
		cond := meta.FindStatusCondition(rc.Status.Conditions, rediscontrollers.ConditionArchiving)
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
