package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// NewCluster is a RedisCluster of replicas nodes with one replica per master.
func NewCluster(ns, name string, replicas int32) *redisv1alpha1.RedisCluster {
	return NewClusterShape(ns, name, replicas, 1)
}

// NewClusterShape is a RedisCluster of replicas nodes with perMaster replicas per master
// (0: masters only).
func NewClusterShape(ns, name string, replicas, perMaster int32) *redisv1alpha1.RedisCluster {
	return &redisv1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       redisv1alpha1.RedisClusterSpec{Replicas: replicas, ReplicasPerMaster: ptr.To(perMaster)},
	}
}

// Password reads the password the operator generated for the cluster ns/name.
func Password(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name + "-password"}, secret); err != nil {
		t.Fatal(err)
	}
	return string(secret.Data["password"])
}

// WaitShape waits up to 4 minutes until the cluster is Running and Ready for its current
// generation, with masters masters and nodes nodes, and a StatefulSet of nodes replicas.
func WaitShape(t *testing.T, c client.Client, key client.ObjectKey, masters, nodes int) *redisv1alpha1.RedisCluster {
	t.Helper()
	return WaitShapeWithin(t, c, key, masters, nodes, 4*time.Minute)
}

// WaitShapeWithin is WaitShape with a limit of its own, for a test whose change moves many
// keys one at a time on purpose.
func WaitShapeWithin(t *testing.T, c client.Client, key client.ObjectKey, masters, nodes int, limit time.Duration) *redisv1alpha1.RedisCluster {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	testenv.Eventually(t, limit, func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		sts := &appsv1.StatefulSet{}
		if err := c.Get(ctx, key, sts); err != nil {
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

// PatchSpec applies a JSON merge patch to the RedisCluster key.
func PatchSpec(t *testing.T, c client.Client, key client.ObjectKey, patch string) {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	if err := c.Get(t.Context(), key, rc); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(t.Context(), rc, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// CliCheck runs `redis-cli --cluster check` until it passes, for up to 15 s: right after
// slots move, a master not involved can briefly hold stale gossip ("Nodes don't agree")
// until the cluster bus catches up.
func CliCheck(t *testing.T, addr, pw string) {
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

// OneShard returns the first master of rc's status, its replica, and another master (a
// writer's seed that stays when the shard goes).
func OneShard(rc *redisv1alpha1.RedisCluster) (master, replica, seed redisv1alpha1.RedisNode) {
	i := slices.IndexFunc(rc.Status.Nodes, func(n redisv1alpha1.RedisNode) bool { return n.Type == "master" })
	master = rc.Status.Nodes[i]
	j := slices.IndexFunc(rc.Status.Nodes, func(n redisv1alpha1.RedisNode) bool {
		return n.Type == "slave" && n.MasterNodeID == master.NodeID
	})
	k := slices.IndexFunc(rc.Status.Nodes, func(n redisv1alpha1.RedisNode) bool {
		return n.Type == "master" && n.NodeID != master.NodeID
	})
	return master, rc.Status.Nodes[j], rc.Status.Nodes[k]
}

// MasterSlots maps each master's node id to its slot count, from the status.
func MasterSlots(rc *redisv1alpha1.RedisCluster) map[string]int {
	out := map[string]int{}
	for _, n := range rc.Status.Nodes {
		if n.Type == "master" {
			out[n.NodeID] += len(Slots(n.Slots))
		}
	}
	return out
}

// Slots lists, in order, the slots of a status slot list ("0-5460,5462").
func Slots(ranges string) []int {
	var out []int
	for r := range strings.SplitSeq(ranges, ",") {
		if r == "" {
			continue
		}
		var a, b int
		if _, err := fmt.Sscanf(r, "%d-%d", &a, &b); err != nil {
			_, _ = fmt.Sscanf(r, "%d", &a)
			b = a
		}
		for s := a; s <= b; s++ {
			out = append(out, s)
		}
	}
	return out
}

// CheckLayout waits up to a minute for the topology invariants in the status, and fails
// the test with what is still wrong when they do not come: the masters the spec implies,
// each with replicasPerMaster replicas or more (at most one apart), every node Connected,
// and no replica on its master's Kubernetes node wherever the pods' nodes allow it. It
// returns the last status read.
func CheckLayout(t *testing.T, c client.Client, key client.ObjectKey) *redisv1alpha1.RedisCluster {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	var problems []string
	deadline := time.Now().Add(time.Minute)
	for {
		if err := c.Get(t.Context(), key, rc); err != nil {
			t.Fatal(err)
		}
		if problems = LayoutProblems(rc); len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, p := range problems {
		t.Error(p)
	}
	return rc
}

// LayoutProblems lists how the status breaks the topology invariants (see CheckLayout).
func LayoutProblems(rc *redisv1alpha1.RedisCluster) []string {
	var problems []string
	masters := int(rc.Spec.Replicas) / (1 + int(*rc.Spec.ReplicasPerMaster))
	replicas, hostOf, podsOn := map[string]int{}, map[string]string{}, map[string]int{}
	for _, n := range rc.Status.Nodes {
		if n.Status != corev1.ConditionTrue {
			problems = append(problems, fmt.Sprintf("node %s is %s: %s", n.Name, n.Reason, n.Message))
		}
		if n.Type == "master" {
			replicas[n.NodeID] += 0
			hostOf[n.NodeID] = n.Hostname
		}
		podsOn[n.Hostname]++
	}
	crowded := 0 // the most pods on one Kubernetes node: above the masters, some pair must share
	for _, c := range podsOn {
		crowded = max(crowded, c)
	}
	for _, n := range rc.Status.Nodes {
		if n.Type != "slave" {
			continue
		}
		if _, ok := replicas[n.MasterNodeID]; !ok {
			problems = append(problems, fmt.Sprintf("replica %s replicates %s, which is not a master", n.Name, n.MasterNodeID))
		}
		replicas[n.MasterNodeID]++
		if crowded <= masters && n.Hostname != "" && n.Hostname == hostOf[n.MasterNodeID] {
			problems = append(problems, fmt.Sprintf("replica %s shares Kubernetes node %s with its master (pods per node %v)", n.Name, n.Hostname, podsOn))
		}
	}
	if len(replicas) != masters {
		problems = append(problems, fmt.Sprintf("%d masters, want %d", len(replicas), masters))
	}
	lo, hi := 1<<30, 0
	for _, c := range replicas {
		lo, hi = min(lo, c), max(hi, c)
	}
	if lo < 1 || hi-lo > 1 {
		problems = append(problems, fmt.Sprintf("replicas per master %v: every master needs one, at most one apart", replicas))
	}
	return problems
}

// Preload writes n keys p:<i> through a cluster client in pipelined batches, so that slot
// moves have keys to carry.
func Preload(t *testing.T, addr, pw string, n int) {
	t.Helper()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, Password: pw})
	defer func() { _ = cc.Close() }()
	for start := 0; start < n; start += 5000 {
		if _, err := cc.Pipelined(t.Context(), func(p goredis.Pipeliner) error {
			for i := start; i < min(start+5000, n); i++ {
				p.Set(t.Context(), "p:"+strconv.Itoa(i), i, 0)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// WaitAOFWritten waits until the node at addr has written to its append-only file every
// write it acknowledged (INFO persistence: aof_buffer_length 0). With appendfsync everysec,
// Redis answers writes and postpones writing them, up to 2 s, while an earlier fsync is
// slow (a busy disk): a container killed in that window comes back without writes it
// acknowledged, and its replica, resynchronising from it, drops them too. A test that kills
// a node for another purpose (a restart, a password read again) waits for this first.
func WaitAOFWritten(t *testing.T, addr, pw string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw, Protocol: 2, DisableIdentity: true})
	defer func() { _ = c.Close() }()
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return false, err.Error()
		}
		v, ok := nodes.ParseClusterInfo(info)["aof_buffer_length"]
		if !ok {
			return false, fmt.Sprintf("%s reports no aof_buffer_length (append-only file off?)", addr)
		}
		return v == "0", fmt.Sprintf("%s holds %s bytes of acknowledged writes not yet in its append-only file", addr, v)
	})
}
