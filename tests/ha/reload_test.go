package ha

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/crashpoint"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/loading"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
	"github.com/middleware-operator/middleware-operator/tests/teststore"
)

// TestOperatorKilledDuringAReloadReplay: a shard loses both copies while counters in its
// slots are INCRed; the user asks for a reload from the archive, and the operator dies in
// the middle of the replay (ArchiveReplayMidway: 200 commands applied). The next operator
// finds the load begun by another run, empties the slots and replays from the base again:
// every counter ends at exactly the INCRs acknowledged (none applied twice, none lost; the
// counters were created after the archive's base, so a second replay on top of the first
// would double what the first applied).
func TestOperatorKilledDuringAReloadReplay(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	store, _ := teststore.Start(t, "")
	op := r.operator(t, crashpoint.Env+"="+crashpoint.ArchiveReplayMidway)
	c := r.env.Client
	key, _, rc, pw := createArchived(t, r, store)
	ns := key.Namespace
	master, replica, seed := redistest.OneShard(rc)
	lost := redistest.Slots(master.Slots)
	keys := redistest.CounterKeys(20, func(slot int) bool { _, ok := slices.BinarySearch(lost, slot); return ok })
	counter := redistest.StartCounter(seed.Instance, pw, keys)
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		n := counter.Acked()
		return n >= 3*crashpoint.ReplayMidwayCommands, fmt.Sprintf("%d INCRs acknowledged", n)
	})
	acked, uncertain := counter.Stop()
	stopped := time.Now()
	// Every acknowledged INCR is in the archive before the loss: every shard archived a
	// write received after the last INCR (a writer of other keys gives each shard one).
	w := redistest.StartAckWriter(seed.Instance, pw)
	waitArchiving(t, c, key, stopped)
	w.Stop()
	var total int64
	for _, n := range acked {
		total += n
	}
	for _, n := range []redisv1alpha1.RedisNode{master, replica} {
		if err := r.kubelet.LoseData(ns, n.Name); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s and %s lost their data after %d acknowledged INCRs of %d counters in slots %s", master.Name, replica.Name, total, len(keys), master.Slots)
	cur := &redisv1alpha1.RedisCluster{}
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		return cur.Status.Phase == redisv1alpha1.PhaseFailed && strings.Contains(cur.Status.Reason, loading.RestoreLostShardsAnnotation),
			fmt.Sprintf("phase %s (%s)", cur.Status.Phase, cur.Status.Reason)
	})
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, loading.RestoreLostShardsAnnotation, plan.ReloadFromArchive)
	if err := c.Patch(t.Context(), &redisv1alpha1.RedisCluster{ObjectMeta: cur.ObjectMeta}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	op.waitCrash(t, "in the middle of the reload's replay")
	if err := c.Get(t.Context(), key, cur); err != nil {
		t.Fatal(err)
	}
	// The fault happened: the dead operator had begun the load (its record is there) and
	// had not finished it.
	if cur.Status.Reload == nil || len(cur.Status.Reload.StartedLoads) == 0 || len(cur.Status.Reload.LoadedShards) > 0 {
		t.Fatalf("the operator died outside a reload's load: status.reload %+v", cur.Status.Reload)
	}
	restarted := time.Now()
	r.operator(t)
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		_, still := cur.Annotations[loading.RestoreLostShardsAnnotation]
		return cur.Status.Reload == nil && !still && meta.IsStatusConditionTrue(cur.Status.Conditions, report.ConditionReady),
			fmt.Sprintf("phase %s (%s), reload %+v", cur.Status.Phase, cur.Status.Reason, cur.Status.Reload)
	})
	t.Logf("the next operator finished the reload %s after its start", time.Since(restarted).Round(time.Second))
	wrong, err := redistest.CheckCounts(t.Context(), seed.Instance, pw, acked, uncertain, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrong) > 0 {
		t.Fatalf("%d of %d counters are off after the reload (a replay applied twice, or INCRs lost): %s", len(wrong), len(keys), strings.Join(wrong, "; "))
	}
	t.Logf("all %d counters hold exactly their %d acknowledged INCRs", len(keys), total)
}
