package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestRedisClusterLosesAWholeShard: a master and its only replica lose their volumes at once
// (the local disks of one zone, say). Their slots have no copy left, and with full coverage
// required the cluster refuses every write. The operator gives nothing up by itself: phase
// Failed, reason DataLost naming the slots and the annotation that accepts the loss. Once the
// user sets it, the lost master is forgotten, its slots are served again (empty) by a live
// master, the two empty pods rejoin, the layout is whole, the annotation is gone, and every
// key outside the lost slots reads back through every node.
func TestRedisClusterLosesAWholeShard(t *testing.T) {
	t.Parallel()
	ns, key, rc, pw := formed(t, "shard", 6, 3)
	master, replica, seed := redistest.OneShard(rc)
	w := redistest.StartWriter(seed.Instance, pw)
	w.WaitWritten(t, 300)
	lostSlots := redistest.Slots(master.Slots)

	start := time.Now()
	for _, n := range []redisv1alpha1.RedisNode{master, replica} {
		if err := kubelet.LoseData(ns, n.Name); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		ready := meta.FindStatusCondition(cur.Status.Conditions, "Ready")
		return cur.Status.Phase == redisv1alpha1.PhaseFailed && ready != nil && ready.Reason == report.ReasonDataLost &&
				strings.Contains(cur.Status.Reason, fmt.Sprintf("%d slots have no copy left", len(lostSlots))) &&
				strings.Contains(cur.Status.Reason, rediscontrollers.AcceptDataLossAnnotation),
			fmt.Sprintf("phase %s (%s)", cur.Status.Phase, cur.Status.Reason)
	})
	t.Logf("%s and its replica %s lost their volumes; reported as DataLost %s later", master.Name, replica.Name, time.Since(start).Round(time.Second))
	for _, n := range []redisv1alpha1.RedisNode{master, replica} {
		if !strings.Contains(kubelet.Log(ns, n.Name), "waiting for the operator") {
			t.Errorf("%s was not held by its start guard", n.Name)
		}
	}
	time.Sleep(3 * time.Second) // still refused: nothing is given up before the user says so
	cur := &redisv1alpha1.RedisCluster{}
	if err := env.Client.Get(t.Context(), key, cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.Phase != redisv1alpha1.PhaseFailed {
		t.Fatalf("phase %s (%s) before the loss was accepted", cur.Status.Phase, cur.Status.Reason)
	}

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, rediscontrollers.AcceptDataLossAnnotation)
	if err := env.Client.Patch(t.Context(), cur, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	accepted := time.Now()
	redistest.WaitShape(t, env.Client, key, 3, 6)
	rc = redistest.CheckLayout(t, env.Client, key)
	t.Logf("healthy again %s after the loss was accepted", time.Since(accepted).Round(time.Second))
	if _, still := rc.Annotations[rediscontrollers.AcceptDataLossAnnotation]; still {
		t.Error("the acceptance annotation is still set: it would accept a later loss unseen")
	}
	if !hasEvent(t.Context(), ns, "DataLossAccepted") {
		t.Error("no DataLossAccepted event")
	}
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, pw)
	gone := w.VerifyExcept(t, env.Client, rc, pw, func(slot int) bool { _, ok := slices.BinarySearch(lostSlots, slot); return ok })
	t.Logf("%d keys were in the %d lost slots", gone, len(lostSlots))
}
