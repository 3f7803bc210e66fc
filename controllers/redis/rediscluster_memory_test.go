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
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// nodeInfo is the INFO server and memory of the node at addr, with its
// cluster-require-full-coverage (CONFIG GET) under that name.
func nodeInfo(ctx context.Context, addr, pw string) (map[string]string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	var info *goredis.StringCmd
	var coverage *goredis.MapStringStringCmd
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		info, coverage = p.Info(ctx, "server", "memory"), p.ConfigGet(ctx, resources.FullCoverageDirective)
		return nil
	}); err != nil {
		return nil, err
	}
	fields := nodes.ParseClusterInfo(info.Val())
	fields[resources.FullCoverageDirective] = coverage.Val()[resources.FullCoverageDirective]
	return fields, nil
}

// waitNodes waits until every node of rc runs as want says (a message when it does not,
// "" when it does); it returns each node's run_id (a restarted node has a new one).
func waitNodes(t *testing.T, rc *redisv1alpha1.RedisCluster, pw string, want func(info map[string]string) string) map[string]string {
	t.Helper()
	runs := map[string]string{}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		for _, n := range rc.Status.Nodes {
			info, err := nodeInfo(ctx, n.Instance, pw)
			if err != nil {
				return false, err.Error()
			}
			if msg := want(info); msg != "" {
				return false, n.Name + " " + msg
			}
			runs[n.Name] = info["run_id"]
		}
		return true, ""
	})
	return runs
}

// waitMemory waits until every node of rc runs maxmemory and policy (see waitNodes).
func waitMemory(t *testing.T, rc *redisv1alpha1.RedisCluster, pw string, maxMemory int64, policy string) map[string]string {
	t.Helper()
	return waitNodes(t, rc, pw, func(info map[string]string) string {
		if info["maxmemory"] != strconv.FormatInt(maxMemory, 10) || info["maxmemory_policy"] != policy {
			return fmt.Sprintf("runs maxmemory %s, policy %s; want %d, %s", info["maxmemory"], info["maxmemory_policy"], maxMemory, policy)
		}
		return ""
	})
}

// waitCoverage waits until every node of rc runs cluster-require-full-coverage want.
func waitCoverage(t *testing.T, rc *redisv1alpha1.RedisCluster, pw, want string) map[string]string {
	t.Helper()
	return waitNodes(t, rc, pw, func(info map[string]string) string {
		if got := info[resources.FullCoverageDirective]; got != want {
			return fmt.Sprintf("runs cluster-require-full-coverage %q, want %q", got, want)
		}
		return ""
	})
}

// waitMemoryStatus waits until the status reports maxMemory from source with policy, on
// the cluster and on every node, with the shares of memory used when maxMemory is set.
func waitMemoryStatus(t *testing.T, key client.ObjectKey, maxMemory int64, policy string, source redisv1alpha1.MaxMemorySource) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		m := cur.Status.Memory
		limited := maxMemory > 0 // else no share is reported
		if m == nil || m.MaxMemory != maxMemory || m.Policy != policy || m.Source != source || (m.FullestMasterPercent != nil) != limited || (m.FullestMaster != "") != limited {
			return false, fmt.Sprintf("status.memory %+v", m)
		}
		for _, n := range cur.Status.Nodes {
			if n.MaxMemory != maxMemory || (n.MemoryPercent != nil) != limited {
				return false, fmt.Sprintf("node %s: maxMemory %d, memoryPercent %v", n.Name, n.MaxMemory, n.MemoryPercent)
			}
		}
		return true, ""
	})
}

// limitedCluster creates the 6-node cluster name in ns whose redis containers have the
// memory limit limit, with the user's redis.conf ConfigMap configmap ("" for none), waits
// until it is formed, and returns its key, the RedisCluster and its password.
func limitedCluster(t *testing.T, ns, name string, limit int64, configmap string) (client.ObjectKey, *redisv1alpha1.RedisCluster, string) {
	t.Helper()
	rc := redistest.NewCluster(ns, name, 6)
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{Configmap: configmap, Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(limit, resource.BinarySI)},
	}}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	return key, redistest.WaitShape(t, env.Client, key, 3, 6), redistest.Password(t, env.Client, ns, name)
}

// clusterClient is a Redis Cluster client entering at every node of rc.
func clusterClient(rc *redisv1alpha1.RedisCluster, pw string, retries int) *goredis.ClusterClient {
	var addrs []string
	for _, n := range rc.Status.Nodes {
		addrs = append(addrs, n.Instance)
	}
	return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, Password: pw, MaxRetries: retries})
}

// TestRedisClusterMemoryAppliedLive: a cluster whose redis containers have a memory limit
// runs maxmemory at 45% of it under noeviction; a new share and policy in spec.memory, and
// then a user's redis.conf that sets maxmemory, reach every running node without a
// restart (CONFIG SET), and the status says where maxmemory comes from. The nodes run
// cluster-require-full-coverage no until that redis.conf asks for yes, live too.
func TestRedisClusterMemoryAppliedLive(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const limit = 200 << 20
	key, rc, pw := limitedCluster(t, ns, "memory", limit, "")
	before := waitMemory(t, rc, pw, limit*45/100, "noeviction")
	waitMemoryStatus(t, key, limit*45/100, "noeviction", redisv1alpha1.MaxMemoryFromLimit)

	changed := time.Now()
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"memory":{"maxMemoryPercent":60,"policy":"allkeys-lru"}}}`)
	after := waitMemory(t, rc, pw, limit*60/100, "allkeys-lru")
	t.Logf("every node runs the new share and policy %s after the spec changed", time.Since(changed).Round(100*time.Millisecond))
	for pod, run := range before {
		if after[pod] != run {
			t.Errorf("%s restarted (run_id %s, then %s): a memory change must not restart nodes", pod, run, after[pod])
		}
	}
	waitMemoryStatus(t, key, limit*60/100, "allkeys-lru", redisv1alpha1.MaxMemoryFromLimit)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		return hasEvent(ctx, ns, report.ReasonMemoryConfigured), "no MemoryConfigured event"
	})

	// The user's redis.conf sets maxmemory: it wins over spec.memory, live too; and so does
	// its cluster-require-full-coverage over the operator's "no".
	waitCoverage(t, rc, pw, "no")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "memory-user", Namespace: ns},
		Data: map[string]string{"redis.conf": "maxmemory 50mb\ncluster-require-full-coverage yes\n"}}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"pod":[{"configmap":"memory-user","resources":{"limits":{"memory":"200Mi"}}}]}}`)
	user := waitMemory(t, rc, pw, 50<<20, "allkeys-lru")
	waitMemoryStatus(t, key, 50<<20, "allkeys-lru", redisv1alpha1.MaxMemoryFromUserConfig)
	covering := waitCoverage(t, rc, pw, "yes")
	for pod, run := range before {
		if user[pod] != run || covering[pod] != run {
			t.Errorf("%s restarted for the user's maxmemory or cluster-require-full-coverage", pod)
		}
	}
}

// TestRedisClusterInvalidMemoryIsRejected: spec.memory's bounds are checked by the API
// server, with messages that name the field and the fix.
func TestRedisClusterInvalidMemoryIsRejected(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	limited := func(limit string, m redisv1alpha1.MemorySpec) func(*redisv1alpha1.RedisCluster) {
		return func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Memory = &m
			if limit != "" {
				rc.Spec.Pod = []redisv1alpha1.PodSpec{{Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
				}}}
			}
		}
	}
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	cases := map[string]admissionCase{
		"maxMemory at the limit":        {change: limited("1Gi", redisv1alpha1.MemorySpec{MaxMemory: q("1Gi")}), want: []string{"spec.memory.maxMemory", "below the redis container's memory limit"}},
		"maxMemory above the limit":     {change: limited("1Gi", redisv1alpha1.MemorySpec{MaxMemory: q("2G")}), want: []string{"spec.memory.maxMemory", "below"}},
		"maxMemory below the limit":     {change: limited("1Gi", redisv1alpha1.MemorySpec{MaxMemory: q("700Mi")})},
		"maxMemory without a limit":     {change: limited("", redisv1alpha1.MemorySpec{MaxMemory: q("700Mi")})},
		"maxMemory of a few bytes":      {change: limited("", redisv1alpha1.MemorySpec{MaxMemory: q("100")}), want: []string{"spec.memory.maxMemory", "at least 1Mi"}},
		"a share and a value":           {change: limited("1Gi", redisv1alpha1.MemorySpec{MaxMemory: q("100Mi"), MaxMemoryPercent: ptr.To[int32](50)}), want: []string{"spec.memory", "not both"}},
		"a share of 5%":                 {change: limited("1Gi", redisv1alpha1.MemorySpec{MaxMemoryPercent: ptr.To[int32](5)}), want: []string{"spec.memory.maxMemoryPercent", "10"}},
		"a share of 99%":                {change: limited("1Gi", redisv1alpha1.MemorySpec{MaxMemoryPercent: ptr.To[int32](99)}), want: []string{"spec.memory.maxMemoryPercent", "95"}},
		"a policy Redis does not know":  {change: limited("", redisv1alpha1.MemorySpec{Policy: "lru"}), want: []string{"spec.memory.policy", "allkeys-lru"}},
		"a policy and a share accepted": {change: limited("1Gi", redisv1alpha1.MemorySpec{Policy: "allkeys-lfu", MaxMemoryPercent: ptr.To[int32](70)})},
	}
	checkAdmission(t, ns, "memory", cases)
}

// fillValue is the value the fill test writes: 64 KiB.
var fillValue = strings.Repeat("v", 64<<10)

// fillCluster writes fillValue under new keys from prefix until n writes were refused with
// Redis's OOM error, or max were written; it returns the acknowledged keys and the refusals.
func fillCluster(t *testing.T, c *goredis.ClusterClient, prefix string, n, max int) (acked []string, refused int) {
	t.Helper()
	other := 0
	for i := 0; refused < n && i < max; i++ {
		key := fmt.Sprintf("%s:%d", prefix, i)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := c.Set(ctx, key, fillValue, 0).Err()
		cancel()
		switch {
		case err == nil:
			acked = append(acked, key)
		case strings.Contains(err.Error(), "OOM command not allowed"):
			refused++
		default:
			if other++; other > 20 {
				t.Fatalf("after %d writes: %v", i, err)
			}
		}
	}
	return acked, refused
}

// TestRedisClusterFillsUntilWritesAreRefused: a writer fills a cluster whose pods have a
// 64 MiB memory limit (and so a real memory cgroup in the local cluster). Under noeviction
// the writer gets OOM errors from Redis, every acknowledged key reads back, no node is
// killed or restarted, the status and the metrics show the fullest master near 100%, and
// the RedisClusterMemoryHigh alert's condition holds over what the metrics endpoint serves.
// Switched to allkeys-lru (live), writes go on and evictions are counted.
func TestRedisClusterFillsUntilWritesAreRefused(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const limit = 64 << 20
	key, rc, pw := limitedCluster(t, ns, "fill", limit, "")
	before := waitMemory(t, rc, pw, limit*45/100, "noeviction")
	redistest.AlertSelects(t, gather(t), ns, "RedisClusterMemoryHigh", false)

	c := clusterClient(rc, pw, 2)
	defer func() { _ = c.Close() }()
	acked, refused := fillCluster(t, c, "fill", 50, 5000)
	t.Logf("noeviction: %d writes of 64 KiB acknowledged, then %d refused with OOM errors", len(acked), refused)
	if refused < 50 {
		t.Fatalf("only %d writes refused after %d acknowledged: maxmemory does not stop the writer", refused, len(acked))
	}
	for _, k := range acked {
		if n, err := c.StrLen(t.Context(), k).Result(); err != nil || n != int64(len(fillValue)) {
			t.Fatalf("acknowledged key %s reads back %d bytes, %v", k, n, err)
		}
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount != 0 || s.LastTerminationState.Terminated != nil {
				t.Errorf("pod %s: container %s restarted %d times, last %+v", p.Name, s.Name, s.RestartCount, s.LastTerminationState.Terminated)
			}
		}
	}
	for pod, run := range waitMemory(t, rc, pw, limit*45/100, "noeviction") {
		if before[pod] != run {
			t.Errorf("%s restarted during the fill", pod)
		}
	}
	// Memory is read by full looks: a converged cluster without spec.autoscale gets one at
	// least every plan.LookSteady.
	testenv.Eventually(t, plan.LookSteady+30*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		ratio := metricSum(t, "middleware_operator_rediscluster_fullest_master_memory_ratio", ns, "fill")
		rejected := metricSum(t, "middleware_operator_rediscluster_rejected_writes_total", ns, "fill")
		m := cur.Status.Memory
		return m != nil && m.FullestMasterPercent != nil && *m.FullestMasterPercent >= 90 && ratio > 0.9 && rejected >= float64(refused),
			fmt.Sprintf("status.memory %+v, fullest master ratio %v, rejected writes %v", m, ratio, rejected)
	})
	redistest.AlertSelects(t, gather(t), ns, "RedisClusterMemoryHigh", true)

	// A cache: the same writer goes on under allkeys-lru, and the nodes evict.
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"memory":{"policy":"allkeys-lru"}}}`)
	waitMemory(t, rc, pw, limit*45/100, "allkeys-lru")
	more, refused := fillCluster(t, c, "lru", 1, 500)
	if refused > 0 || len(more) < 450 {
		t.Errorf("under allkeys-lru %d writes acknowledged, %d refused; want them all acknowledged", len(more), refused)
	}
	testenv.Eventually(t, plan.LookSteady+30*time.Second, func(context.Context) (bool, string) {
		evicted := metricSum(t, "middleware_operator_rediscluster_evicted_keys_total", ns, "fill")
		return evicted > 0, fmt.Sprintf("evicted keys %v", evicted)
	})
	t.Logf("allkeys-lru: %d more writes acknowledged, %v keys evicted", len(more), metricSum(t, "middleware_operator_rediscluster_evicted_keys_total", ns, "fill"))
}

// TestRedisClusterOOMKillIsCounted shows the fault maxmemory prevents, in a cluster: the
// user's redis.conf turns maxmemory off (maxmemory 0, which wins over the 45% share), a
// writer fills a master until the kernel kills it at its 64 MiB limit, its pod's
// lastState says OOMKilled, and the operator counts the kill in
// middleware_operator_rediscluster_oom_kills_total (the RedisClusterNodeOOMKilled alert).
func TestRedisClusterOOMKillIsCounted(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const limit = 64 << 20
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "oom-user", Namespace: ns}, Data: map[string]string{"redis.conf": "maxmemory 0\n"}}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	key, rc, pw := limitedCluster(t, ns, "oom", limit, "oom-user")
	waitMemory(t, rc, pw, 0, "noeviction")
	waitMemoryStatus(t, key, 0, "noeviction", redisv1alpha1.MaxMemoryFromUserConfig)
	c := clusterClient(rc, pw, -1)
	defer func() { _ = c.Close() }()
	written := 0
	for ; written < 4*limit/len(fillValue); written++ {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := c.Set(ctx, fmt.Sprintf("oom:%d", written), fillValue, 0).Err()
		cancel()
		if err != nil {
			t.Logf("the writer stopped after %d writes of 64 KiB: %v", written, err)
			break
		}
	}
	var killed string
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				if t := s.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" && s.RestartCount > 0 {
					killed = p.Name
				}
			}
		}
		kills := metricSum(t, "middleware_operator_rediscluster_oom_kills_total", ns, "oom")
		return killed != "" && kills >= 1, fmt.Sprintf("OOMKilled pod %q, oom_kills_total %v", killed, kills)
	})
	t.Logf("without maxmemory, %s was killed by the kernel at its 64 MiB limit after %d writes of 64 KiB; the operator counted it", killed, written)
}
