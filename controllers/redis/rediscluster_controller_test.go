package redis_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/internal/caching"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

func waitRunning(t *testing.T, key client.ObjectKey) *redisv1alpha1.RedisCluster {
	t.Helper()
	rc := &redisv1alpha1.RedisCluster{}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		if err := env.Client.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		ready := meta.FindStatusCondition(rc.Status.Conditions, "Ready")
		return rc.Status.Phase == redisv1alpha1.PhaseRunning && ready != nil && ready.Status == metav1.ConditionTrue &&
				rc.Status.ObservedGeneration == rc.Generation,
			fmt.Sprintf("phase %q reason %q slotsOk %d", rc.Status.Phase, rc.Status.Reason, rc.Status.SlotsOK)
	})
	return rc
}

func TestRedisClusterFormsOnRealRedis(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "seed", 6)
	// With the exporter sidecar: its pods too pass the namespace's "restricted" Pod Security.
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{MonitorImage: "oliver006/redis_exporter:v1.62.0"}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = waitRunning(t, key)
	pw := redistest.Password(t, env.Client, ns, "seed")
	if ns := mustNamespace(t, ns); ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace %s enforces %q, want restricted", ns.Name, ns.Labels["pod-security.kubernetes.io/enforce"])
	}

	if rc.Status.SlotsOK != 16384 || rc.Status.SlotsAssigned != 16384 || rc.Status.Masters != 3 {
		t.Errorf("slotsOk %d slotsAssigned %d masters %d", rc.Status.SlotsOK, rc.Status.SlotsAssigned, rc.Status.Masters)
	}
	if len(rc.Status.Nodes) != 6 {
		t.Fatalf("status lists %d nodes, want 6", len(rc.Status.Nodes))
	}
	// The status matches what Redis itself says.
	admin := execute.NewAdmin(pw, 2*time.Second)
	defer func() { _ = admin.Close() }()
	masters, replicasOf := 0, map[string]int{}
	for _, n := range rc.Status.Nodes {
		l, ok := myself(t, admin, n.Instance)
		if !ok || l.ID != n.NodeID {
			t.Errorf("node %s: status id %s, CLUSTER NODES says %s", n.Name, n.NodeID, l.ID)
			continue
		}
		if n.Instance != l.Addr || n.Type != l.Role || n.Slots != nodes.FormatSlotRanges(l.Slots) || n.Status != corev1.ConditionTrue {
			t.Errorf("status %+v does not match CLUSTER NODES %+v", n, l)
		}
		if n.Type == "master" {
			masters++
			if n.MasterNodeID != n.NodeID {
				t.Errorf("master %s has masterNodeId %s", n.Name, n.MasterNodeID)
			}
		} else {
			if n.MasterNodeID != l.MasterID {
				t.Errorf("replica %s masterNodeId %s, CLUSTER NODES says %s", n.Name, n.MasterNodeID, l.MasterID)
			}
			replicasOf[n.MasterNodeID]++
		}
		if n.Hostname == "" || n.DomainName != n.Name+".seed."+ns+".svc.cluster.local" {
			t.Errorf("node %s hostname %q domainName %q", n.Name, n.Hostname, n.DomainName)
		}
	}
	if masters != 3 || len(replicasOf) != 3 {
		t.Errorf("%d masters, replicas spread over %d masters; want 3 and 3", masters, len(replicasOf))
	}

	// redis-cli's own check agrees.
	out, err := exec.CommandContext(t.Context(), "redis-cli", "--no-auth-warning", "-a", pw, "--cluster", "check", rc.Status.Nodes[0].Instance).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "[OK] All 16384 slots covered") {
		t.Errorf("redis-cli --cluster check: %v\n%s", err, out)
	}

	// A cluster-aware client writes and reads 10,000 keys through it.
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{rc.Status.Nodes[0].Instance}, Password: pw})
	defer func() { _ = cc.Close() }()
	for i := range 10000 {
		if err := cc.Set(t.Context(), "key:"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatalf("SET key:%d: %v", i, err)
		}
	}
	for i := range 10000 {
		v, err := cc.Get(t.Context(), "key:"+strconv.Itoa(i)).Int()
		if err != nil || v != i {
			t.Fatalf("GET key:%d = %d, %v", i, v, err)
		}
	}

	// The pods carry their node's zone (Kubernetes copies it at scheduling), which the
	// operator reads to keep a master and its replicas apart.
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Labels[corev1.LabelTopologyZone] == "" {
			t.Errorf("pod %s has no %s label: the operator cannot see zones", p.Name, corev1.LabelTopologyZone)
		}
	}

	// The password is in no process's arguments, nor in redis-server's environment, and
	// the servers require it.
	assertNoSecretInProcesses(t, ns, rc.Status.Nodes, pw)

	// The password is in no status, no event.
	raw, _ := json.Marshal(rc)
	if strings.Contains(string(raw), pw) {
		t.Error("the password appears in the RedisCluster")
	}
	evs := &corev1.EventList{}
	if err := env.Client.List(t.Context(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, pw) {
			t.Errorf("the password appears in event %s", e.Name)
		}
		// The local cluster leaves out the controllers that cannot take loopback pod IPs.
		if strings.HasPrefix(e.Reason, "FailedToUpdateEndpoint") {
			t.Errorf("the simulation's Warning %s: %s", e.Reason, e.Message)
		}
	}
}

// myself is the node at addr as it describes itself in CLUSTER NODES.
func myself(t *testing.T, admin *execute.Admin, addr string) (nodes.Node, bool) {
	t.Helper()
	view, err := admin.ClusterNodes(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range view {
		if n.Myself {
			return n, true
		}
	}
	return nodes.Node{}, false
}

func TestRedisClusterSevenNodesGiveThreeMastersFourReplicas(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "seven", 7)
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	rc = waitRunning(t, client.ObjectKeyFromObject(rc))
	masters, replicas := 0, 0
	for _, n := range rc.Status.Nodes {
		switch n.Type {
		case "master":
			masters++
		case "slave":
			replicas++
		}
	}
	if masters != 3 || replicas != 4 {
		t.Errorf("%d masters and %d replicas, want 3 and 4", masters, replicas)
	}
}

// TestRedisClusterConvergedMakesNoTopologyCommandsAndNoWrites reconciles a Running cluster
// (its password in a Secret of the user's) with a reconciler whose client, API reader and
// Redis admin count every write, every read that bypasses a cache and every topology
// command: four reconciles make none, open no new connection to any node (the admin is
// kept from one reconcile to the next) and are quiet looks: each sends each node one
// CLUSTER INFO, and at most one of them (the first past LookIdle) a CLUSTER NODES.
func TestRedisClusterConvergedMakesNoTopologyCommandsAndNoWrites(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const password = "steady-user-password-1"
	if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steady-pw"},
		Data: map[string][]byte{"password": []byte(password)}}); err != nil {
		t.Fatal(err)
	}
	rc := redistest.NewCluster(ns, "steady", 6)
	rc.Spec.PasswordSecret = "steady-pw"
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	waitRunning(t, key)
	// Let gossip about the replicas settle so the status is final. The reconciler below is a
	// second operator that did not form the cluster: to it the nodes are settling until
	// cluster-node-timeout + 2 s after their start (health.SettleLeft), and a settling
	// cluster's looks are full ones; so wait as long.
	time.Sleep(health.SettleTime(clusterconn.NodeTimeout))
	rc = waitRunning(t, key)
	// The operator labelled the user's Secret when it first read it: the references cache,
	// which lists only labelled Secrets, holds it, so the looks below read it from there.
	pw := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "steady-pw"}, pw); err != nil {
		t.Fatal(err)
	}
	if pw.Labels[caching.WatchLabel] != caching.WatchLabelValue {
		t.Errorf("the user's password Secret has labels %v, want %s=%s", pw.Labels, caching.WatchLabel, caching.WatchLabelValue)
	}

	refs, err := caching.NewReferences(mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	var writes, topology atomic.Int64
	var reads, cacheReads testenv.WriteCounts
	var adminsMu sync.Mutex
	var admins []*execute.Admin
	recorder := events.NewFakeRecorder(10)
	r := &rediscontrollers.RedisClusterReconciler{
		Client: testenv.CountingClient{Client: countingGets{Client: mgr.GetClient(), reads: countingReader{Reader: mgr.GetClient(), reads: &cacheReads}}, Writes: &writes}, Scheme: env.Scheme, Recorder: recorder,
		APIReader: countingReader{Reader: mgr.GetAPIReader(), reads: &reads}, References: refs,
		OperatorNamespace: operatorNamespace, // as the suite's reconciler, or the two rewrite the NetworkPolicy in turn
		NewAdmin: func(login conn.Login, tlsConfig *tls.Config) clusterconn.Admin {
			a := clusterconn.DefaultAdminFactory(login, tlsConfig)
			adminsMu.Lock()
			admins = append(admins, a.(*execute.Admin))
			adminsMu.Unlock()
			return countingAdmin{Admin: a, topology: &topology}
		},
	}
	// connections sums the connections every admin the reconciler made has opened: counted
	// by the admins, not the nodes, whose total_connections_received also counts other
	// tests' clients still dialling a pod IP that kwok has since given to one of these pods.
	connections := func() (made int, opened int64) {
		adminsMu.Lock()
		defer adminsMu.Unlock()
		for _, a := range admins {
			opened += a.Connections()
		}
		return len(admins), opened
	}
	// This reconciler's first look ensures the children (it has not seen them yet); looks go
	// on until one changes nothing, so the checks below start from a converged cluster.
	testenv.LookUntilQuiet(t, r, key, &writes, recorder)
	// Those looks ensured the children, the NetworkPolicy among them: the operator may list
	// and watch NetworkPolicies, so it read the policy from its cache, not the API server.
	policy := fmt.Sprintf("%T", &networkingv1.NetworkPolicy{})
	if api, cached := reads.Get(policy), cacheReads.Get(policy); api != 0 || cached == 0 {
		t.Errorf("ensuring the children read the NetworkPolicy %d times from the API server and %d from the cache, want 0 and some", api, cached)
	}
	// Then four looks, once, with no retry: nothing may change. The last full look found the
	// cluster converged, so looks within LookIdle of it are quiet (rediscluster_quiet.go):
	// one CLUSTER INFO a node and nothing else; at most one of the four, the first after
	// LookIdle, reads the nodes whole.
	const looks = 4
	// The first quiet look opens the quiet looks' own connection to each node
	// (conn.Pool.ClusterInfos); the looks below keep them.
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	writes.Store(0)
	topology.Store(0)
	reads.Reset()
	ctx := t.Context()
	before := nodeCounters(ctx, t, rc, password)
	adminsBefore, connsBefore := connections()
	start := time.Now()
	for range looks {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	after := nodeCounters(ctx, t, rc, password)
	window := time.Since(start)
	adminsAfter, connsAfter := connections()
	got := reads.Reset()
	if adminsAfter != adminsBefore || connsAfter != connsBefore {
		t.Errorf("%d looks made %d new admins that opened %d new connections, want 0 and 0 (the admin and its connections are kept from one look to the next)", looks, adminsAfter-adminsBefore, connsAfter-connsBefore)
	}
	// The suite's own operator looks at this idle cluster too: one CLUSTER INFO a node every
	// IdleLook, and one CLUSTER NODES every LookIdle (its full looks); its looks in the window
	// are allowed for.
	otherLooks := int(window/plan.IdleLook(5*time.Second)) + 1
	otherFull := int(window/plan.LookIdle) + 1
	for i := range before {
		if nodes := after[i].nodes - before[i].nodes; nodes > 1+otherFull {
			t.Errorf("%s: %d CLUSTER NODES in %d looks within %s, want at most 1 (the looks after a converged one are quiet) and up to %d of the suite's operator",
				rc.Status.Nodes[i].Name, nodes, looks, window.Round(time.Millisecond), otherFull)
		}
		if infos := after[i].info - before[i].info; infos < looks || infos > looks+otherLooks {
			t.Errorf("%s: %d CLUSTER INFO in %d looks within %s, want %d (one round trip a look, quiet or full) and up to %d of the suite's operator",
				rc.Status.Nodes[i].Name, infos, looks, window.Round(time.Millisecond), looks, otherLooks)
		}
	}
	if writes.Load() != 0 || topology.Load() != 0 || len(recorder.Events) != 0 {
		t.Errorf("%d looks at a converged cluster made %d API writes, %d topology commands, %d events; want none", looks, writes.Load(), topology.Load(), len(recorder.Events))
	}
	// The children were ensured by the first look; no look within the minute after reads
	// any from the API server (the NetworkPolicy included), nor a Secret or ConfigMap.
	if len(got) != 0 {
		t.Errorf("%d looks at a converged cluster read %v from the API server, want nothing", looks, got)
	}
}

// countingReader counts the reads it sends the API server, by Go type of the object.
type countingReader struct {
	client.Reader
	reads *testenv.WriteCounts
}

func (c countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(fmt.Sprintf("%T", obj))
	return c.Reader.Get(ctx, key, obj, opts...)
}

// countingGets is a client whose reads go through reads (a countingReader over the same
// client's cache).
type countingGets struct {
	client.Client
	reads countingReader
}

func (c countingGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reads.Get(ctx, key, obj, opts...)
}

// commandCalls are how often a node ran CLUSTER NODES and CLUSTER INFO so far.
type commandCalls struct{ nodes, info int }

// nodeCounters reads, from each node of rc's status, how often it ran CLUSTER NODES and
// CLUSTER INFO so far.
func nodeCounters(ctx context.Context, t *testing.T, rc *redisv1alpha1.RedisCluster, password string) []commandCalls {
	t.Helper()
	out := make([]commandCalls, len(rc.Status.Nodes))
	for i, n := range rc.Status.Nodes {
		c := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: password, Protocol: 2, DisableIdentity: true, PoolSize: 1})
		stats, err := c.Info(ctx, "stats", "commandstats").Result()
		_ = c.Close()
		if err != nil {
			t.Fatalf("INFO of %s: %v", n.Name, err)
		}
		fields := nodes.ParseClusterInfo(stats)
		_, _ = fmt.Sscanf(fields["cmdstat_cluster|nodes"], "calls=%d", &out[i].nodes)
		_, _ = fmt.Sscanf(fields["cmdstat_cluster|info"], "calls=%d", &out[i].info)
	}
	return out
}

func TestRedisClusterPauseStopsChanges(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "paused", 6)
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	waitRunning(t, key)
	patch := func(spec string) {
		t.Helper()
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(t.Context(), key, cur); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Patch(t.Context(), cur, client.RawPatch("application/merge-patch+json", []byte(spec))); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"pause":true}}`)
	patch(`{"spec":{"replicas":8,"version":"7.2.4"}}`)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, "Progressing")
		return cur.Status.ObservedGeneration == cur.Generation && strings.Contains(cur.Status.Reason, "paused") && c != nil && c.Reason == "Paused",
			fmt.Sprintf("reason %q conditions %+v", cur.Status.Reason, cur.Status.Conditions)
	})
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(t.Context(), key, sts); err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 6 || sts.Spec.Template.Spec.Containers[0].Image != "redis:7.0.15" {
		t.Errorf("a paused cluster's StatefulSet changed: replicas %d image %s", *sts.Spec.Replicas, sts.Spec.Template.Spec.Containers[0].Image)
	}
	// Resuming carries out what was asked while paused.
	patch(`{"spec":{"pause":false}}`)
	rc = redistest.WaitShape(t, env.Client, key, 4, 8)
	if err := env.Client.Get(t.Context(), key, sts); err != nil {
		t.Fatal(err)
	}
	if img := sts.Spec.Template.Spec.Containers[0].Image; img != "redis:7.2.4" {
		t.Errorf("after resuming the StatefulSet runs %s, want redis:7.2.4", img)
	}
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, redistest.Password(t, env.Client, ns, "paused"))
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func intOrString(s string) *intstr.IntOrString { v := intstr.Parse(s); return &v }

// TestRedisClusterHealsAfterEveryPodIsRecreated deletes every pod at once. The StatefulSet
// recreates them (kwok may give them other IPs); each keeps its nodes.conf and data on its
// volume; the operator re-introduces them and the cluster returns with every key.
func TestRedisClusterHealsAfterEveryPodIsRecreated(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "phoenix", 6)
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = waitRunning(t, key)
	pw := redistest.Password(t, env.Client, ns, "phoenix")
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{rc.Status.Nodes[0].Instance}, Password: pw})
	for i := range 2000 {
		if err := cc.Set(t.Context(), "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = cc.Close()
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)
	ips := map[string]string{}
	for _, n := range rc.Status.Nodes {
		ips[n.Name] = n.Instance
	}

	start := time.Now()
	// The fault is every pod back at once, some at new IPs: kwok may hand the same IPs back,
	// so the pods are deleted again (at most three times) until one comes back elsewhere.
	deleteEveryPodUntilOneMoves(t, ns, "phoenix", rc)
	// Then wait for the cluster to be whole again.
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		changed := 0
		for _, n := range cur.Status.Nodes {
			if n.Instance != ips[n.Name] {
				changed++
			}
		}
		ready := meta.FindStatusCondition(cur.Status.Conditions, "Ready")
		return changed > 0 && cur.Status.Phase == redisv1alpha1.PhaseRunning && ready != nil && ready.Status == metav1.ConditionTrue,
			fmt.Sprintf("phase %s (%s), %d nodes moved, slotsOk %d, nodes %+v", cur.Status.Phase, cur.Status.Reason, changed, cur.Status.SlotsOK, cur.Status.Nodes)
	})
	rc = waitRunning(t, key)
	t.Logf("every pod deleted at once; Ready again after %s", time.Since(start).Round(time.Second))
	cc = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{rc.Status.Nodes[0].Instance}, Password: pw})
	defer func() { _ = cc.Close() }()
	for i := range 2000 {
		v, err := cc.Get(t.Context(), "k"+strconv.Itoa(i)).Int()
		if err != nil || v != i {
			t.Fatalf("after the restart GET k%d = %d, %v", i, v, err)
		}
	}
	// Every key the writer was told it wrote, through each node in turn (a node that
	// still lists a peer as noaddr would send its clients nowhere).
	w.Verify(t, env.Client, rc, pw)
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, pw)
}

func mustNamespace(t *testing.T, name string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// createRunning creates rc, waits until it runs, logs how long forming it (how: "over TLS")
// took, and returns its key, the running cluster and its password.
func createRunning(t *testing.T, rc *redisv1alpha1.RedisCluster, how string) (client.ObjectKey, *redisv1alpha1.RedisCluster, string) {
	t.Helper()
	start := time.Now()
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	running := waitRunning(t, key)
	t.Logf("formed %s in %.1f s", how, time.Since(start).Seconds())
	return key, running, redistest.Password(t, env.Client, rc.Namespace, rc.Name)
}

// scaleOutToFourMasters scales a 3x1 cluster to 8 nodes, waits for 4 masters with their
// replicas, checks that each master serves about a quarter of the slots, logs how long it
// took, and returns the cluster.
func scaleOutToFourMasters(t *testing.T, key client.ObjectKey, how string) *redisv1alpha1.RedisCluster {
	t.Helper()
	start := time.Now()
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"replicas":8}}`)
	rc := redistest.WaitShape(t, env.Client, key, 4, 8)
	t.Logf("scaled out to 4 masters %s in %.1f s", how, time.Since(start).Seconds())
	for id, n := range redistest.MasterSlots(rc) {
		if n < 4000 {
			t.Errorf("master %s serves %d slots after the scale out, want about 4096", id, n)
		}
	}
	return rc
}

// assertNoSecretInProcesses checks every process of each node's pod: no secret in its
// arguments, none in redis-server's environment; and each server requires a password.
func assertNoSecretInProcesses(t *testing.T, ns string, nodes []redisv1alpha1.RedisNode, secrets ...string) {
	t.Helper()
	for _, n := range nodes {
		pids := kubelet.Processes(ns, n.Name)
		servers := 0
		for _, pid := range pids {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			isServer := strings.TrimSpace(string(comm)) == "redis-server"
			if isServer {
				servers++
			}
			environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			for i, secret := range secrets {
				if strings.Contains(string(cmdline), secret) {
					t.Errorf("%s: password %d is in the arguments of %q", n.Name, i, strings.ReplaceAll(string(cmdline), secret, "<password>"))
				}
				if isServer && strings.Contains(string(environ), secret) {
					t.Errorf("%s: password %d is in redis-server's environment", n.Name, i)
				}
			}
		}
		if servers != 1 {
			t.Errorf("%s: %d redis-server processes among %v, want 1 (else the check above proved nothing)", n.Name, servers, pids)
		}
		if err := goredis.NewClient(&goredis.Options{Addr: n.Instance}).Ping(t.Context()).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("%s answers PING without the password: %v", n.Name, err)
		}
	}
}
