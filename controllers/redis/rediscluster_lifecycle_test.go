package redis_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// waitShape waits until the cluster is Running with masters masters and nodes nodes.
func waitShape(t *testing.T, key client.ObjectKey, masters, nodes int) *redisv1alpha1.RedisCluster {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		sts := &appsv1.StatefulSet{}
		if err := env.Client.Get(ctx, key, sts); err != nil {
			return false, err.Error()
		}
		ready := meta.FindStatusCondition(rc.Status.Conditions, "Ready")
		return rc.Status.Phase == redisv1alpha1.PhaseRunning && ready != nil && ready.Status == metav1.ConditionTrue &&
				int(rc.Status.Masters) == masters && len(rc.Status.Nodes) == nodes && int(*sts.Spec.Replicas) == nodes &&
				rc.Status.ObservedGeneration == rc.Generation,
			fmt.Sprintf("phase %s (%s), masters %d, nodes %d, slotsOk %d", rc.Status.Phase, rc.Status.Reason, rc.Status.Masters, len(rc.Status.Nodes), rc.Status.SlotsOK)
	})
	return rc
}

func patchSpec(t *testing.T, key client.ObjectKey, patch string) {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	if err := env.Client.Get(t.Context(), key, rc); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(t.Context(), rc, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// redisCliCheck runs `redis-cli --cluster check` until it passes, for up to 15 s: right
// after slots move, a master not involved can briefly hold stale gossip ("Nodes don't agree")
// until the cluster bus catches up.
func redisCliCheck(t *testing.T, addr, pw string) {
	t.Helper()
	var out []byte
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out, err = exec.CommandContext(t.Context(), "redis-cli", "--no-auth-warning", "-a", pw, "--cluster", "check", addr).CombinedOutput()
		ok := err == nil && strings.Contains(string(out), "[OK] All 16384 slots covered") && !strings.Contains(string(out), "[WARNING]")
		if ok {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Errorf("redis-cli --cluster check %s: %v\n%s", addr, err, out)
}

// masterSlots maps each master's node id to its slot count, from the status.
func masterSlots(rc *redisv1alpha1.RedisCluster) map[string]int {
	out := map[string]int{}
	for _, n := range rc.Status.Nodes {
		if n.Type != "master" {
			continue
		}
		for r := range strings.SplitSeq(n.Slots, ",") {
			if r == "" {
				continue
			}
			var a, b int
			if _, err := fmt.Sscanf(r, "%d-%d", &a, &b); err != nil {
				_, _ = fmt.Sscanf(r, "%d", &a)
				b = a
			}
			out[n.NodeID] += b - a + 1
		}
	}
	return out
}

func TestRedisClusterScalesOutAndInWithoutLosingKeys(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := newCluster(ns, "elastic", 6)
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = waitRunning(t, key)
	pw := password(t, ns, "elastic")
	t.Cleanup(func() {
		if t.Failed() {
			dumpViews(t, ns, pw)
		}
	})
	w := startWriter(rc.Status.Nodes[0].Instance, pw)
	time.Sleep(time.Second)

	patchSpec(t, key, `{"spec":{"replicas":10}}`)
	rc = waitShape(t, key, 5, 10)
	even := float64(redisadmin.SlotCount) / 5
	for id, n := range masterSlots(rc) {
		if d := (float64(n) - even) / even; d > 0.02 || d < -0.02 {
			t.Errorf("master %s has %d slots, more than 2%% from %0.f", id, n, even)
		}
	}
	redisCliCheck(t, rc.Status.Nodes[0].Instance, pw)

	patchSpec(t, key, `{"spec":{"replicas":6}}`)
	waitShape(t, key, 3, 6)
	rc = checkLayout(t, key)
	redisCliCheck(t, rc.Status.Nodes[0].Instance, pw)
	w.verify(t, rc, pw)
}

func TestRedisClusterAssignReceiveMovesExactlyTheRequestedSlots(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := newCluster(ns, "assign", 6)
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = waitRunning(t, key)
	before := masterSlots(rc)
	var ids []string
	for _, n := range rc.Status.Nodes {
		if n.Type == "master" {
			ids = append(ids, n.NodeID)
		}
	}
	patchSpec(t, key, fmt.Sprintf(`{"spec":{"replicas":8,"updateStrategy":{"type":"AssignReceive","pipeline":"50","assignStrategies":[{"slots":1000,"fromReplicas":"%s"},{"slots":600,"fromReplicas":"%s,%s"}]}}}`,
		ids[0], ids[1], ids[2]))
	rc = waitShape(t, key, 4, 8)
	after := masterSlots(rc)
	if got := before[ids[0]] - after[ids[0]]; got != 1000 {
		t.Errorf("%d slots moved from %s, want 1000", got, ids[0])
	}
	if got := before[ids[1]] + before[ids[2]] - after[ids[1]] - after[ids[2]]; got != 600 {
		t.Errorf("%d slots moved from %s and %s, want 600", got, ids[1], ids[2])
	}
	for id, n := range after {
		if before[id] == 0 && n != 1600 {
			t.Errorf("the new master %s has %d slots, want 1600", id, n)
		}
	}
	redisCliCheck(t, rc.Status.Nodes[0].Instance, password(t, ns, "assign"))
}

// TestRedisClusterUpgradesOnePodAtATime changes the version: every pod is replaced, at most
// one is down at any moment, masters fail over first, and no key is lost.
func TestRedisClusterUpgradesOnePodAtATime(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := newCluster(ns, "upgrade", 6)
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = waitRunning(t, key)
	pw := password(t, ns, "upgrade")
	w := startWriter(rc.Status.Nodes[0].Instance, pw)
	time.Sleep(time.Second)

	patchSpec(t, key, `{"spec":{"version":"7.2.4"}}`)
	maxDown := 0
	testenv.Eventually(t, 5*time.Minute, func(ctx context.Context) (bool, string) {
		sts := &appsv1.StatefulSet{}
		pods := &corev1.PodList{}
		if err := env.Client.Get(ctx, key, sts); err != nil {
			return false, err.Error()
		}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "upgrade"}); err != nil {
			return false, err.Error()
		}
		down, updated := 6-len(pods.Items), 0
		for _, p := range pods.Items {
			if !p.DeletionTimestamp.IsZero() || p.Status.Phase != corev1.PodRunning {
				down++
			}
			if p.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision && p.Spec.Containers[0].Image == "redis:7.2.4" {
				updated++
			}
		}
		maxDown = max(maxDown, down)
		cur := &redisv1alpha1.RedisCluster{}
		_ = env.Client.Get(ctx, key, cur)
		return updated == 6 && cur.Status.Phase == redisv1alpha1.PhaseRunning,
			fmt.Sprintf("%d of 6 pods updated, phase %s (%s)", updated, cur.Status.Phase, cur.Status.Reason)
	})
	if maxDown > 1 {
		t.Errorf("%d pods were down at once, want at most 1", maxDown)
	}
	rc = waitShape(t, key, 3, 6)
	redisCliCheck(t, rc.Status.Nodes[0].Instance, pw)
	_, outage := w.stop()
	t.Logf("longest time a write failed or blocked during the upgrade: %s", outage)
	w.verify(t, rc, pw)
	evs := &corev1.EventList{}
	if err := env.Client.List(t.Context(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	failovers := 0
	for _, e := range evs.Items {
		if e.Reason == "FailedOver" {
			failovers++
		}
	}
	if failovers < 3 {
		t.Errorf("%d failovers before master restarts, want at least 3", failovers)
	}
}

// TestRedisClusterSurvivesAMasterCrashDuringSlotMigration crashes the first master's
// redis-server while slots move to new masters. The kubelet restarts it (its data is on its
// volume); the operator fixes the open slot and finishes the scale out; no key is lost.
func TestRedisClusterSurvivesAMasterCrashDuringSlotMigration(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := newCluster(ns, "crash", 6)
	rc.Spec.UpdateStrategy.Pipeline = intOrString("10") // small batches: a longer migration to crash into
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = waitRunning(t, key)
	pw := password(t, ns, "crash")
	w := startWriter(rc.Status.Nodes[0].Instance, pw)
	time.Sleep(3 * time.Second)
	pods := map[string]string{} // address -> pod
	for _, n := range rc.Status.Nodes {
		pods[n.Instance] = n.Name
	}
	patchSpec(t, key, `{"spec":{"replicas":8}}`)
	// Crash the source of a slot being migrated, caught in the act.
	admin := redisadmin.NewAdmin(pw, time.Second)
	defer func() { _ = admin.Close() }()
	crashed := ""
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		for addr, pod := range pods {
			nodes, err := admin.ClusterNodes(ctx, addr)
			if err != nil {
				continue
			}
			for _, n := range nodes {
				if n.Myself && len(n.Migrating) > 0 {
					crashed = pod
					return kubelet.Crash(ns, pod) == nil, ""
				}
			}
		}
		return false, "no slot seen migrating"
	})
	t.Logf("crashed %s while it was migrating a slot", crashed)
	rc = waitShape(t, key, 4, 8)
	redisCliCheck(t, rc.Status.Nodes[0].Instance, pw)
	w.verify(t, rc, pw)
}
