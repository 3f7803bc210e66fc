package redis_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// poolLabel marks the Kubernetes nodes a test owns, with its namespace as the value.
const poolLabel = "middleware-operator.io/test-pool"

// onPool creates a RedisCluster of replicas pods whose pods run only on n Kubernetes nodes
// of the test's own (spread over them as the operator's default affinity would), so the
// test can cordon them without touching other tests; it waits for masters masters. Other
// tests' pods may land on those nodes too (they carry no taint), so the test's end only
// cordons them: deleting them took every such pod down at once (three pods of another
// test's upgrade, in a run with 4 tests at a time).
func onPool(t *testing.T, name string, n int, replicas int32, masters int) (ns string, nodes []string, key client.ObjectKey, rc *redisv1alpha1.RedisCluster, pw string) {
	t.Helper()
	ns = env.Namespace(t)
	for i := range n {
		node := fmt.Sprintf("%s-%d", ns, i)
		if err := env.Cluster.AddNode(t.Context(), node, localcluster.Zones[i%len(localcluster.Zones)], 100, map[string]string{poolLabel: ns}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // t.Context() is over by now
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				n := &corev1.Node{}
				if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
					return err
				}
				n.Spec.Unschedulable = true
				return env.Client.Update(context.Background(), n)
			})
		})
		nodes = append(nodes, node)
	}
	rc = redistest.NewCluster(ns, name, replicas)
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{Affinity: &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: poolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{ns}},
			}}},
		}},
		PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: objectlabels.SelectorLabels(objectlabels.RedisClusterKind, name)}},
		}}},
	}}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key = client.ObjectKeyFromObject(rc)
	return ns, nodes, key, redistest.WaitShape(t, env.Client, key, masters, int(replicas)), redistest.Password(t, env.Client, ns, name)
}

// cordon marks nodes unschedulable (or schedulable again), as kubectl cordon does, and
// gives the scheduler's informer a moment to see it (a pod created at once could still
// land on a node just cordoned).
func cordon(t *testing.T, nodes []string, unschedulable bool) {
	t.Helper()
	for _, name := range nodes {
		testenv.Update(t, env.Client, client.ObjectKey{Name: name}, &corev1.Node{}, func(n *corev1.Node) { n.Spec.Unschedulable = unschedulable })
	}
	time.Sleep(2 * time.Second)
}

// TestRedisClusterPendingPodWhileAMasterDies: a replica's pod is recreated but stays
// Pending (every node it may run on is cordoned) while another shard's master loses its
// volume. The Pending pod stops no healing; once the nodes take pods again, all is whole.
func TestRedisClusterPendingPodWhileAMasterDies(t *testing.T) {
	t.Parallel()
	ns, nodes, key, rc, pw := onPool(t, "pending", 3, 6, 3)
	keepOut := func(string) { cordon(t, nodes, true) }
	letIn := func() {
		// The master may heal before the StatefulSet controller has made the deleted
		// replica's pod again: wait for it, Pending and unscheduled.
		testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
			pending := 0
			pods := &corev1.PodList{}
			if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" {
					pending++
				}
			}
			return pending == 1, fmt.Sprintf("%d pods Pending unscheduled while the master healed, want the deleted replica's", pending)
		})
		cordon(t, nodes, false)
	}
	healsWithAReplicaGone(t, ns, key, rc, pw, keepOut, letIn)
}

// TestRedisClusterSeparatesAReplicaFromItsMaster: a replica's pod is rescheduled onto its
// master's Kubernetes node (every other node cordoned, as in a drain); once the nodes are
// back, the operator swaps replicas between masters so no master shares a node with its
// replica again, moving no data and losing no key.
func TestRedisClusterSeparatesAReplicaFromItsMaster(t *testing.T) {
	t.Parallel()
	ns, nodes, key, _, pw := onPool(t, "apart", 3, 6, 3)
	rc := redistest.CheckLayout(t, env.Client, key) // separated from the start
	replica := podOfRole(rc, "slave")
	var masterHost string
	for _, n := range rc.Status.Nodes {
		if n.NodeID == replica.MasterNodeID {
			masterHost = n.Hostname
		}
	}
	if masterHost == "" {
		t.Fatalf("the status names no Kubernetes node for %s's master: %s", replica.Name, describeNodes(rc))
	}
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)
	var others []string
	for _, n := range nodes {
		if n != masterHost {
			others = append(others, n)
		}
	}
	cordon(t, others, true)
	old := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: replica.Name}, old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: replica.Name}, pod); err != nil {
			return false, err.Error()
		}
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != masterHost && pod.DeletionTimestamp.IsZero() && pod.UID != old.UID {
			// Scheduled before the scheduler saw the cordon: move it again, as a drain would.
			_ = env.Client.Delete(ctx, pod)
			return false, fmt.Sprintf("%s was scheduled on %s; deleted it again", pod.Name, pod.Spec.NodeName)
		}
		where := fmt.Sprintf("pod %s on %q, %s, deleting %v", pod.UID, pod.Spec.NodeName, pod.Status.Phase, !pod.DeletionTimestamp.IsZero())
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		for _, n := range cur.Status.Nodes {
			if n.Name == replica.Name {
				return n.Hostname == masterHost && pod.UID != old.UID, fmt.Sprintf("%s is on %s at %s in the status; %s", n.Name, n.Hostname, n.Instance, where)
			}
		}
		return false, replica.Name + " is not in the status"
	})
	cordon(t, others, false)
	redistest.WaitShape(t, env.Client, key, 3, 6)
	rc = redistest.CheckLayout(t, env.Client, key)
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		return hasEvent(ctx, ns, string(recovery.ActionSeparate)), "no event says a replica was moved"
	})
	waitCondition(t, key, report.ConditionReplicasSeparated, metav1.ConditionTrue, report.ReasonSeparated)
	t.Logf("%s landed on its master's node %s; separated again %s later", replica.Name, masterHost, time.Since(start).Round(time.Second))
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, pw)
	w.Verify(t, env.Client, rc, pw)
}

// TestRedisClusterFinishesAnInterruptedJoin: an operator killed between CLUSTER MEET and
// CLUSTER REPLICATE of a join leaves the new node an empty master. Staged with the
// operator paused (as a dead one would stand still): the StatefulSet grows to 7, the new
// node is met, then the spec asks for 7. The operator must make it a replica, not a
// fourth master: 3 masters, 7 nodes.
func TestRedisClusterFinishesAnInterruptedJoin(t *testing.T) {
	t.Parallel()
	ns, key, rc, pw := formed(t, "join", 6, 3)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)
	pause(t, key)
	testenv.Update(t, env.Client, key, &appsv1.StatefulSet{}, func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](7) })
	admin := execute.NewAdmin(pw, time.Second)
	defer func() { _ = admin.Close() }()
	newPod := rc.Name + "-6"
	var newAddr string
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		newAddr = kubelet.Addr(ns, newPod)
		if newAddr == "" {
			return false, newPod + " does not run yet"
		}
		_, err := admin.ClusterNodes(ctx, newAddr)
		return err == nil, fmt.Sprintf("%s does not answer: %v", newPod, err)
	})
	host, port, err := net.SplitHostPort(newAddr)
	if err != nil {
		t.Fatal(err)
	}
	meet := recovery.Action{Commands: []conn.Command{{Addr: rc.Status.Nodes[0].Instance, Args: []string{"CLUSTER", "MEET", host, port}}}}
	if err := admin.Run(t.Context(), meet); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		nodes, err := admin.ClusterNodes(ctx, newAddr)
		return err == nil && len(nodes) == 7, fmt.Sprintf("%s knows %d nodes (%v)", newPod, len(nodes), err)
	})
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"replicas":7,"pause":false}}`)
	start := time.Now()
	redistest.WaitShape(t, env.Client, key, 3, 7)
	rc = redistest.CheckLayout(t, env.Client, key)
	for _, n := range rc.Status.Nodes {
		if n.Name == newPod && n.Type != "slave" {
			t.Errorf("%s is a %s, want a replica", newPod, n.Type)
		}
	}
	t.Logf("the half-joined %s became a replica %s after the operator resumed", newPod, time.Since(start).Round(time.Second))
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, pw)
	w.Verify(t, env.Client, rc, pw)
}

// A shard cannot be kept apart on one Kubernetes node: the cluster still forms and serves,
// and the status says which replicas share a node with their master, and what to do.
func TestRedisClusterSaysWhenReplicasCannotBeSeparated(t *testing.T) {
	t.Parallel()
	ns, nodes, key, _, _ := onPool(t, "crowded", 1, 6, 3)
	c := waitCondition(t, key, report.ConditionReplicasSeparated, metav1.ConditionFalse, report.ReasonTooFewNodes)
	for _, want := range []string{"shares Kubernetes node " + nodes[0] + " with its master", "add Kubernetes nodes"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the %s condition says %q, which lacks %q", report.ConditionReplicasSeparated, c.Message, want)
		}
	}
	if n := strings.Count(c.Message, "shares Kubernetes node"); n != 3 {
		t.Errorf("the condition names %d replicas, want all 3: %s", n, c.Message)
	}
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		return hasEvent(ctx, ns, report.ReasonTooFewNodes), "no Warning event says the replicas share a node"
	})
}

// waitCondition waits until the RedisCluster's condition has the status and reason, and
// returns it.
func waitCondition(t *testing.T, key client.ObjectKey, kind string, want metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		rc := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(rc.Status.Conditions, kind)
		if c == nil {
			return false, "no " + kind + " condition"
		}
		got = *c
		return c.Status == want && c.Reason == reason, fmt.Sprintf("%s is %s (%s): %s", kind, c.Status, c.Reason, c.Message)
	})
	return got
}
