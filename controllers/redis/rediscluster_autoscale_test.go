package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// fullestMaster is the master of rc with the largest share of its maxmemory used, read
// from each master itself (INFO memory), with that share in percent.
func fullestMaster(ctx context.Context, rc *redisv1alpha1.RedisCluster, pw string) (string, float64, error) {
	name, top := "", 0.0
	for _, n := range rc.Status.Nodes {
		if n.Type != "master" || n.Slots == "" {
			continue
		}
		info, err := nodeInfo(ctx, n.Instance, pw)
		if err != nil {
			return "", 0, err
		}
		used, _ := strconv.ParseFloat(info["used_memory"], 64)
		maxMemory, _ := strconv.ParseFloat(info["maxmemory"], 64)
		if maxMemory == 0 {
			return "", 0, fmt.Errorf("%s has no maxmemory", n.Name)
		}
		if share := 100 * used / maxMemory; share > top {
			name, top = n.Name, share
		}
	}
	return name, top, nil
}

// fillPast writes fillValue under new keys from prefix, 16 at a time, until the fullest
// master of rc (as it reads now) uses over percent of its maxmemory; it returns the
// acknowledged keys and that master's share.
func fillPast(t *testing.T, c *goredis.ClusterClient, rc *redisv1alpha1.RedisCluster, pw, prefix string, percent float64) ([]string, float64) {
	t.Helper()
	var acked []string
	for i := 0; ; {
		_, share, err := fullestMaster(t.Context(), rc, pw)
		if err != nil {
			t.Fatal(err)
		}
		if share > percent {
			return acked, share
		}
		if len(acked) > 5000 {
			t.Fatalf("%d writes of 64 KiB and the fullest master uses %.0f%%, want over %.0f%%", len(acked), share, percent)
		}
		for range 16 {
			key := fmt.Sprintf("%s:%d", prefix, i)
			i++
			if err := c.Set(t.Context(), key, fillValue, 0).Err(); err != nil {
				t.Fatalf("write %s: %v", key, err)
			}
			acked = append(acked, key)
		}
	}
}

// createAutoscaled creates the RedisCluster name of 3 masters and 3 replicas whose redis
// containers have a memory limit of limit bytes, with autoscale, and waits until it is
// Ready and its nodes run maxmemory at 45% of the limit.
func createAutoscaled(t *testing.T, ns, name string, limit int64, autoscale redisv1alpha1.AutoscaleSpec) (client.ObjectKey, *redisv1alpha1.RedisCluster, string) {
	t.Helper()
	rc := redistest.NewCluster(ns, name, 6)
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(limit, resource.BinarySI)},
	}}}
	rc.Spec.Autoscale = &autoscale
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = redistest.WaitShape(t, env.Client, key, 3, 6)
	pw := redistest.Password(t, env.Client, ns, name)
	waitMemory(t, rc, pw, limit*45/100, "noeviction")
	return key, rc, pw
}

// autoscaleOf reads the status.autoscale of the cluster key (nil when none).
func autoscaleOf(ctx context.Context, key client.ObjectKey) (*redisv1alpha1.AutoscaleStatus, error) {
	rc := &redisv1alpha1.RedisCluster{}
	if err := env.Client.Get(ctx, key, rc); err != nil {
		return nil, err
	}
	return rc.Status.Autoscale, nil
}

// eventSays reports whether an event of reason in ns has a message containing says.
func eventSays(ctx context.Context, ns, reason, says string) bool {
	evs := &corev1.EventList{}
	if err := env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
		return false
	}
	for _, e := range evs.Items {
		if e.Reason == reason && strings.Contains(e.Message, says) {
			return true
		}
	}
	return false
}

// TestRedisClusterAutoscalesOnMemory: a cluster of 3 masters whose redis containers have a
// 128 MiB memory limit, with spec.autoscale (target 40% of maxmemory, 3 to 4 masters,
// sustain 5 s, cool-down 2 min). A writer fills the masters past the target while an
// independent writer runs: the operator adds a shard (status.autoscale.masters 4, an
// AutoscaledOut event saying why), the new master gets slots, and the fullest master falls
// below the target. Filled past it again, the autoscaler first cools down, then stays at
// its maximum of 4 masters. Every acknowledged key reads back, through every node.
func TestRedisClusterAutoscalesOnMemory(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	key, rc, pw := createAutoscaled(t, ns, "autoscale", 128<<20, redisv1alpha1.AutoscaleSpec{TargetPercent: ptr.To[int32](40), MinMasters: 3, MaxMasters: 4,
		Sustain: &metav1.Duration{Duration: 5 * time.Second}, CoolDown: &metav1.Duration{Duration: 30 * time.Minute}})
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		st, err := autoscaleOf(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		return st != nil && st.Masters == 3 && st.Phase == redisv1alpha1.AutoscalePhase("BelowTarget"), fmt.Sprintf("status.autoscale %+v", st)
	})

	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	defer w.Stop()
	w.WaitWritten(t, 200)
	c := clusterClient(rc, pw, 5)
	defer func() { _ = c.Close() }()
	acked, share := fillPast(t, c, rc, pw, "fill", 43)
	crossed := time.Now()
	t.Logf("%d writes of 64 KiB took the fullest master to %.0f%% of its maxmemory (target 40%%)", len(acked), share)

	rc = redistest.WaitShape(t, env.Client, key, 4, 8)
	t.Logf("%s from crossing the target to 4 masters serving every slot, Ready", time.Since(crossed).Round(time.Second))
	st, err := autoscaleOf(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if st.Masters != 4 || !strings.Contains(st.LastChangeReason, "adding a shard") || st.LastChange == nil {
		t.Errorf("status.autoscale %+v: want 4 masters and the reason of the change", st)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		return eventSays(ctx, ns, report.ReasonAutoscaledOut, "adding a shard (4 masters)"), "no AutoscaledOut event saying why"
	})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		name, share, err := fullestMaster(ctx, rc, pw)
		if err != nil {
			return false, err.Error()
		}
		return share < 40, fmt.Sprintf("the fullest master %s uses %.0f%% of its maxmemory after the scale out", name, share)
	})

	// Past the target again within the cool-down: no change. Once the cool-down is shortened
	// (the spec is read at every decision), none beyond the maximum. The cool-down is long
	// at first so that a slow scale out on a busy machine cannot outlast it.
	more, share := fillPast(t, c, rc, pw, "more", 43)
	t.Logf("%d more writes took the fullest master to %.0f%%", len(more), share)
	acked = append(acked, more...)
	for _, want := range []string{"CoolingDown", "AtMaximum"} {
		if want == "AtMaximum" {
			redistest.PatchSpec(t, env.Client, key, `{"spec":{"autoscale":{"coolDown":"1s"}}}`)
		}
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			st, err := autoscaleOf(ctx, key)
			if err != nil {
				return false, err.Error()
			}
			return st.Phase == redisv1alpha1.AutoscalePhase(want) && st.Masters == 4, fmt.Sprintf("status.autoscale %+v, want phase %s", st, want)
		})
	}
	rc = redistest.WaitShape(t, env.Client, key, 4, 8)
	st, _ = autoscaleOf(t.Context(), key)
	if !strings.Contains(st.Message, "maximum of 4 masters") {
		t.Errorf("status.autoscale.message %q, want it to name the maximum", st.Message)
	}

	for _, k := range acked {
		if n, err := c.StrLen(t.Context(), k).Result(); err != nil || n != int64(len(fillValue)) {
			t.Fatalf("acknowledged key %s reads back %d bytes, %v", k, n, err)
		}
	}
	w.Verify(t, env.Client, rc, pw)
}

// TestRedisClusterInvalidAutoscaleIsRejected: spec.autoscale's bounds are checked by the API
// server, with messages that name the field and the fix.
func TestRedisClusterInvalidAutoscaleIsRejected(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	autoscale := func(a redisv1alpha1.AutoscaleSpec) func(*redisv1alpha1.RedisCluster) {
		return func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Autoscale = &a }
	}
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Duration{Duration: v}
	}
	cases := map[string]admissionCase{
		"a maximum below the minimum": {change: autoscale(redisv1alpha1.AutoscaleSpec{MinMasters: 5, MaxMasters: 4}), want: []string{"spec.autoscale.maxMasters", "at least minMasters"}},
		"two masters at least":        {change: autoscale(redisv1alpha1.AutoscaleSpec{MinMasters: 2, MaxMasters: 4}), want: []string{"spec.autoscale.minMasters", "3"}},
		"a target of 99%":             {change: autoscale(redisv1alpha1.AutoscaleSpec{MinMasters: 3, MaxMasters: 4, TargetPercent: ptr.To[int32](99)}), want: []string{"spec.autoscale.targetPercent", "95"}},
		"more nodes than a cluster may have": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ReplicasPerMaster = ptr.To[int32](2)
				rc.Spec.Replicas = 9
				rc.Spec.Autoscale = &redisv1alpha1.AutoscaleSpec{MinMasters: 3, MaxMasters: 400}
			},
			want: []string{"spec.autoscale.maxMasters", "at most 1000"},
		},
		"a negative sustain": {change: autoscale(redisv1alpha1.AutoscaleSpec{MinMasters: 3, MaxMasters: 4, Sustain: d("-1m")}), want: []string{"spec.autoscale.sustain", "between 0s and 24h"}},
		"a cool-down of two days": {
			change: autoscale(redisv1alpha1.AutoscaleSpec{MinMasters: 3, MaxMasters: 4, CoolDown: d("48h")}), want: []string{"spec.autoscale.coolDown", "between 0s and 24h"},
		},
		"with AssignReceive": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy = redisv1alpha1.UpdateStrategy{Type: redisv1alpha1.AssignReceive,
					AssignStrategies: []redisv1alpha1.AssignStrategy{{Slots: 100, FromReplicas: "a"}}}
				rc.Spec.Autoscale = &redisv1alpha1.AutoscaleSpec{MinMasters: 3, MaxMasters: 4}
			},
			want: []string{"spec.autoscale", "AutoReceive"},
		},
		"bounds, target and clocks accepted": {change: autoscale(redisv1alpha1.AutoscaleSpec{MinMasters: 3, MaxMasters: 6, TargetPercent: ptr.To[int32](70),
			Sustain: d("10m"), CoolDown: d("30m"), ScaleIn: true})},
	}
	checkAdmission(t, ns, "autoscale", cases)
}
