package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// drainedMaster is the master a scale in of rc to its first keep pods drains: a leaving
// pod's master, else (the leaving pods are replicas) the staying master beyond the spec's
// count, which with equal slot counts is the one of the highest ordinal. It returns its
// pod and its lowest slot.
func drainedMaster(t *testing.T, rc *redisv1alpha1.RedisCluster, keep int) (string, int) {
	t.Helper()
	var last redisv1alpha1.RedisNode
	for _, n := range rc.Status.Nodes {
		if n.Type != "master" {
			continue
		}
		ordinal, _ := strconv.Atoi(n.Name[strings.LastIndex(n.Name, "-")+1:])
		last = n
		if ordinal >= keep {
			break
		}
	}
	lo, _, _ := strings.Cut(strings.Split(last.Slots, ",")[0], "-")
	slot, err := strconv.Atoi(strings.TrimSpace(lo))
	if err != nil || last.Name == "" {
		t.Fatalf("no master to drain in %+v", rc.Status.Nodes)
	}
	return last.Name, slot
}

// TestRedisClusterScaleInHeldByABigSlot: 4 masters with a 64 MiB memory limit, the master
// a scale in to 3 drains filled under one hash tag until it refuses writes (OOM), the
// others to half their maxmemory, so that slot holds more than any other master has room
// for; an independent writer runs. Scaled in: its other slots move, the giant one stays, and the scale in does not wait
// in silence: SlotsMovable=False ScaleInHeld names the slot, its size and the room and says
// what would help, a ScaleInHeld Warning event says the same, the cluster stays Ready with
// no open slot, and every acknowledged key reads back.
func TestRedisClusterScaleInHeldByABigSlot(t *testing.T) {
	t.Parallel()
	const limit = 64 << 20
	_, key, rc, pw := formedWith(t, "scaleinheld", 8, 4, func(rc *redisv1alpha1.RedisCluster) {
		rc.Spec.Pod = []redisv1alpha1.PodSpec{{Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(limit, resource.BinarySI)},
		}}}
	})
	ns := key.Namespace
	waitMemory(t, rc, pw, limit*45/100, "noeviction")
	pod, slot := drainedMaster(t, rc, 6)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	defer w.Stop()
	w.WaitWritten(t, 200)
	c := clusterClient(rc, pw, 5)
	defer func() { _ = c.Close() }()
	acked := fillTagPast(t, c, rc, pw, tagsForSlots(slot)[0], 100)
	t.Logf("%d writes of 64 KiB filled %s under one hash tag in slot %d until it refused writes (OOM)", len(acked), pod, slot)
	// The staying masters half full (one tag each, in their first slot, which stays): each
	// has less room than the slot, and none is full.
	for _, n := range rc.Status.Nodes {
		if n.Type != "master" || n.Name == pod {
			continue
		}
		first, _ := strconv.Atoi(strings.TrimSpace(strings.Split(strings.Split(n.Slots, ",")[0], "-")[0]))
		acked = append(acked, fillTagPast(t, c, rc, pw, tagsForSlots(first)[0], 50)...)
	}
	t.Logf("%d writes in all, the staying masters filled to half their maxmemory", len(acked))

	start := time.Now()
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"replicas":6}}`)
	var got *redisv1alpha1.RedisCluster
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		got = &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, got); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, report.ConditionSlotsMovable)
		ready := meta.FindStatusCondition(got.Status.Conditions, report.ConditionReady)
		held := cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == report.ReasonScaleInHeld &&
			strings.Contains(cond.Message, fmt.Sprintf("slot %d (", slot)) && strings.Contains(cond.Message, "raise the memory limit") &&
			strings.Contains(cond.Message, "keep 4 masters")
		return held && ready != nil && ready.Status == metav1.ConditionTrue,
			fmt.Sprintf("phase %s (%s), SlotsMovable %+v, heldSlots %+v", got.Status.Phase, got.Status.Reason, cond, got.Status.HeldSlots)
	})
	t.Logf("%s after the scale in: %s", time.Since(start).Round(time.Second), meta.FindStatusCondition(got.Status.Conditions, report.ConditionSlotsMovable).Message)
	if masterOfSlot(got, slot) == "" || got.Status.Masters != 4 {
		t.Errorf("slot %d is not served, or %d masters serve slots (want 4: the drained master keeps the giant slot)", slot, got.Status.Masters)
	}
	for _, n := range got.Status.Nodes {
		if n.Name == pod && strings.TrimSpace(n.Slots) != strconv.Itoa(slot) {
			t.Errorf("%s serves %q, want only the giant slot %d (its other slots moved)", pod, n.Slots, slot)
		}
	}
	assertNoOpenSlot(t, got, pw)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		return eventSays(ctx, ns, report.ReasonScaleInHeld, fmt.Sprintf("slot %d (", slot)), "no ScaleInHeld event naming the slot"
	})
	for _, k := range acked {
		if n, err := c.StrLen(t.Context(), k).Result(); err != nil || n != int64(len(fillValue)) {
			t.Fatalf("acknowledged key %s reads back %d bytes, %v", k, n, err)
		}
	}
	w.Verify(t, env.Client, got, pw)
}
