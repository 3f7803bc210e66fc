package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// tagsForSlots finds a hash tag in each of slots.
func tagsForSlots(slots ...int) []string {
	out := make([]string, len(slots))
	for i := 0; slices.Contains(out, ""); i++ {
		tag := strconv.Itoa(i)
		if j := slices.Index(slots, rdbload.KeySlot(tag)); j >= 0 && out[j] == "" {
			out[j] = tag
		}
	}
	return out
}

// masterOfSlot is the instance (ip:port) of the master of rc's status that serves slot.
func masterOfSlot(rc *redisv1alpha1.RedisCluster, slot int) string {
	for _, n := range rc.Status.Nodes {
		if n.Type != "master" {
			continue
		}
		for _, r := range strings.Split(n.Slots, ",") {
			lo, hi, found := strings.Cut(strings.TrimSpace(r), "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if found {
				b, _ = strconv.Atoi(hi)
			}
			if a <= slot && slot <= b {
				return n.Instance
			}
		}
	}
	return ""
}

// fillTagPast writes fillValue under keys "{tag}:i", 4 at a time, until the master of the
// tag's slot uses over percent of its maxmemory or refuses a write with OOM; it returns
// the acknowledged keys.
func fillTagPast(t *testing.T, c *goredis.ClusterClient, rc *redisv1alpha1.RedisCluster, pw, tag string, percent float64) []string {
	t.Helper()
	slot, err := c.ClusterKeySlot(t.Context(), "{"+tag+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	addr := masterOfSlot(rc, int(slot))
	var acked []string
	for i := 0; ; {
		info, err := nodeInfo(t.Context(), addr, pw)
		if err != nil {
			t.Fatal(err)
		}
		used, _ := strconv.ParseFloat(info["used_memory"], 64)
		maxMemory, _ := strconv.ParseFloat(info["maxmemory"], 64)
		if 100*used/maxMemory > percent {
			return acked
		}
		for range 4 {
			key := fmt.Sprintf("{%s}:%d", tag, i)
			i++
			err := c.Set(t.Context(), key, fillValue, 0).Err()
			if err != nil && strings.HasPrefix(err.Error(), "OOM") {
				return acked
			}
			if err != nil {
				t.Fatalf("write %s: %v", key, err)
			}
			acked = append(acked, key)
		}
	}
}

// TestRedisClusterGiantSlotsAreHeld: the shape of issue 54. A cluster of 3 masters with a
// 64 MiB memory limit and spec.autoscale (target 40%, 3 to 5 masters), each master filled
// under one hash tag (in its first slot, as redis-benchmark's) until it refuses writes
// (OOM), so nearly all its data sits in one slot, while an independent writer runs. The
// autoscaler adds shards; the rebalances move what fits (a giant slot an empty master can
// take included), roll back at once what a target refuses with OOM, and hold what fits in
// no master: the cluster ends Ready with 4 or 5 masters and no open slot, status.heldSlots
// and a SlotsMovable=False condition name a giant slot, a SlotTooBig event too, and the
// autoscaler stops (SlotTooBig, or AtMaximum) and stays. Every acknowledged key reads back.
func TestRedisClusterGiantSlotsAreHeld(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const limit = 64 << 20
	// The autoscaler may add no master until every master is filled (maxMasters 3): on a
	// loaded machine it otherwise started moving the third master's tag while it was being
	// filled, and that slot outgrew both sides of its migration (an open slot neither can
	// close, which the operator leaves open and says so: not this test's scenario).
	key, rc, pw := createAutoscaled(t, ns, "giant", limit, redisv1alpha1.AutoscaleSpec{TargetPercent: ptr.To[int32](40), MinMasters: 3, MaxMasters: 3,
		Sustain: &metav1.Duration{Duration: 5 * time.Second}, CoolDown: &metav1.Duration{Duration: 5 * time.Second}})

	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	defer w.Stop()
	w.WaitWritten(t, 200)
	c := clusterClient(rc, pw, 5)
	defer func() { _ = c.Close() }()
	var acked []string
	giants := map[int64]bool{}
	// One tag per master, in its first slot as redis-benchmark's tags are (the create splits
	// the slots 0-5460, 5461-10922, 10923-16383): the first slots a rebalance moves.
	tags := tagsForSlots(0, 5461, 10923)
	for _, slot := range []int64{0, 5461, 10923} {
		giants[slot] = true
	}
	for _, tag := range tags {
		acked = append(acked, fillTagPast(t, c, rc, pw, tag, 100)...)
	}
	t.Logf("%d writes of 64 KiB under 3 hash tags filled each master until it refused writes (OOM)", len(acked))
	patchAutoscaleMax(t, key, 5)
	filled := time.Now()

	// The end state: held, named, the autoscaler stopped, and no change for 20 s.
	var masters int32
	var since time.Time
	testenv.Eventually(t, 5*time.Minute, func(ctx context.Context) (bool, string) {
		got := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, got); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, report.ConditionSlotsMovable)
		ready := meta.FindStatusCondition(got.Status.Conditions, report.ConditionReady)
		heldGiant := 0
		for _, h := range got.Status.HeldSlots {
			if h.Giant && giants[int64(h.Slot)] && strings.Contains(h.Message, "fewer keys under one hash tag") {
				heldGiant++
			}
		}
		st := got.Status.Autoscale
		if got.Status.Masters != masters || since.IsZero() {
			masters, since = got.Status.Masters, time.Now()
		}
		stopped := st != nil && st.Masters == masters && (st.Phase == "SlotTooBig" || st.Phase == "AtMaximum")
		named := cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == report.ReasonSlotTooBig && heldGiant > 0
		ok := time.Since(since) > 20*time.Second && stopped && named && got.Status.Phase == redisv1alpha1.PhaseRunning &&
			ready != nil && ready.Status == metav1.ConditionTrue && masters >= 4
		return ok, fmt.Sprintf("phase %s (%s), masters %d, heldSlots %+v, SlotsMovable %+v, autoscale %+v",
			got.Status.Phase, got.Status.Reason, got.Status.Masters, got.Status.HeldSlots, cond, st)
	})
	t.Logf("%s from the fill to %d masters, Ready, a giant slot held and named, the autoscaler stopped (and 20 s without change)", time.Since(filled).Round(time.Second), masters)
	rc = redistest.WaitShape(t, env.Client, key, int(masters), 2*int(masters))
	assertNoOpenSlot(t, rc, pw)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		return eventSays(ctx, ns, report.ReasonSlotTooBig, "fewer keys under one hash tag"), "no SlotTooBig event"
	})
	for _, k := range acked {
		if n, err := c.StrLen(t.Context(), k).Result(); err != nil || n != int64(len(fillValue)) {
			t.Fatalf("acknowledged key %s reads back %d bytes, %v", k, n, err)
		}
	}
	w.Verify(t, env.Client, rc, pw)
}

// assertNoOpenSlot fails the test when any node of rc lists a slot migrating or importing
// in its own view.
func assertNoOpenSlot(t *testing.T, rc *redisv1alpha1.RedisCluster, pw string) {
	t.Helper()
	for _, n := range rc.Status.Nodes {
		if n.Instance == "" {
			continue
		}
		view, err := nodeClusterNodes(t.Context(), n.Instance, pw)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(view, "->-") || strings.Contains(view, "-<-") {
			t.Errorf("%s lists an open slot:\n%s", n.Name, view)
		}
	}
}

// nodeClusterNodes is CLUSTER NODES of the node at addr.
func nodeClusterNodes(ctx context.Context, addr, pw string) (string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	return c.ClusterNodes(ctx).Result()
}

// patchAutoscaleMax sets spec.autoscale.maxMasters of the cluster key.
func patchAutoscaleMax(t *testing.T, key client.ObjectKey, maxMasters int32) {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	if err := env.Client.Get(t.Context(), key, rc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(rc.DeepCopy())
	rc.Spec.Autoscale.MaxMasters = maxMasters
	if err := env.Client.Patch(t.Context(), rc, patch); err != nil {
		t.Fatal(err)
	}
}
